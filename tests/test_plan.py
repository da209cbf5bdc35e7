"""The study's timing jobs, from its config (lmstudy.plan): what the full and quick presets measure."""

from __future__ import annotations

import yaml

from lmstudy import plan
from lmstudy.config import apply_preset

from .conftest import REPO


def timing(preset: str) -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    return apply_preset({**config, "preset": preset})["timing"]


def test_the_full_study_times_the_naive_model_everywhere_and_no_ladder_rung():
    # The optimization ladder is section 7's (ladder.smk), not timing variants.
    jobs = plan.timing_configurations(timing("full"))
    assert {j["variant"] for j in jobs} == {"naive"}
    assert len(jobs) == len({tuple(j.values()) for j in jobs}) == 5 * 4 * 2  # sizes x contexts x precisions


def test_variants_a_user_adds_run_in_bf16_at_the_longest_context():
    jobs = plan.timing_configurations({**timing("full"), "variants": ["naive", "sdpa", "sdpa-compile"]})
    others = [j for j in jobs if j["variant"] != "naive"]
    assert {(j["ctx"], j["precision"]) for j in others} == {(1024, "bf16")}
    assert sorted(j["variant"] for j in others) == ["sdpa"] * 5 + ["sdpa-compile"] * 5
    assert len(jobs) == len({tuple(j.values()) for j in jobs}) == 50


def test_a_compiled_rung_times_the_training_step_only():
    assert plan.timing_passes("sdpa-compile", ["forward", "forward_backward", "train_step"]) == ["train_step"]
    assert plan.timing_passes("sdpa", ["forward", "train_step"]) == ["forward", "train_step"]
    settings = {**timing("full"), "passes": ["forward"]}
    assert not [j for j in plan.timing_configurations(settings) if j["variant"].endswith("-compile")]


def test_the_quick_preset_adds_one_compute_bound_model():
    jobs = plan.timing_configurations(timing("quick"))
    big = [j for j in jobs if j["size"] == "2.7B"]
    assert sorted((j["ctx"], j["precision"], j["variant"]) for j in big) == [
        (256, "bf16", "naive"), (256, "fp32", "naive")]
    assert {j["variant"] for j in jobs} == {"naive"}  # SDPA and compile are the ladder's (section 7)


def test_ladder_context_lengths_move_the_rungs():
    settings = {**timing("full"), "variants": ["naive", "sdpa"], "ladder_context_lengths": [512, 2048]}
    rungs = {(j["ctx"]) for j in plan.timing_configurations(settings) if j["variant"] != "naive"}
    assert rungs == {512, 2048}
