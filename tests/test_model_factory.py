

@pytest.mark.parametrize("factory", ["llama", "qwen2", "gpt2"])
def test_a_hugging_face_model_is_built_from_its_config_class_with_the_sizes_dimensions(factory):
    pytest.importorskip("transformers", reason='transformers is an optional extra: pip install -e ".[hf]"')
    reference = f"lmstudy.measure.hf_factory:{factory}"
    choice = ModelChoice(factory=reference)
    model = build_model(choice, DIMS, context_length=8, attention="sdpa")
    ids = torch.randint(64, (2, 8))
    assert logits_of(model(ids), ids, 64, reference).shape == (2, 8, 64)
    counted = count_on_meta(choice, DIMS, context_length=8, batch_size=2)
    assert counted["parameters"] == sum(p.numel() for p in model.parameters())
