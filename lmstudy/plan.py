"""Which jobs the study runs, from its config: the workflow's target lists.

Torch-free: the Snakefile calls it at parse time, on a submit host too.
"""

from __future__ import annotations

# The timing section's models (timing.variants): the naive attention, PyTorch's fused
# one (sdpa), and either under torch.compile. The one list of them: the schema's
# check, the wildcard constraint and the scripts read it here.
VARIANTS = ("naive", "sdpa", "naive-compile", "sdpa-compile")

# A compiled variant times the training step only: the compiled model's
# forward passes are section 6's (the optimization ladder is section 7's).
COMPILED_VARIANT_PASSES = ("train_step",)


def variant_precisions(variant: str, precisions: list[str]) -> list[str]:
    """The naive model runs in every precision; the other variants (sdpa, -compile) in bf16 only."""
    return list(precisions) if variant == "naive" else [p for p in precisions if p == "bf16"]


def timing_passes(variant: str, passes) -> list[str]:
    """The passes a timing job of `variant` measures: a compiled variant times the training step only."""
    if variant.endswith("-compile"):
        return [p for p in passes if p in COMPILED_VARIANT_PASSES]
    return list(passes)


def timing_configurations(timing: dict) -> list[dict]:
    """Every timing job's wildcards (size, ctx, precision, variant), without repeats.

    The grid sizes x context lengths for the naive model; the other
    variants (where timing.variants lists them) at `ladder_context_lengths`
    (null or absent: the longest of context_lengths); each variant in its
    precisions. Then
    `extra_configurations`: single (size, context length) points with their
    own variants (default naive), such as one compute-bound model in a quick
    preset.
    """
    rungs = [v for v in timing["variants"] if v != "naive"]
    naive = ["naive"] if "naive" in timing["variants"] else []
    ladder_contexts = timing.get("ladder_context_lengths") or [max(timing["context_lengths"])]
    contexts = list(dict.fromkeys([*timing["context_lengths"], *ladder_contexts]))
    points = [
        (size, ctx, [*(naive if ctx in timing["context_lengths"] else []),
                     *(rungs if ctx in ladder_contexts else [])])
        for size in timing["sizes"]
        for ctx in contexts
    ]
    points += [
        (extra["size"], extra["context_length"], extra.get("variants", ["naive"]))
        for extra in timing.get("extra_configurations", [])
    ]
    jobs, seen = [], set()
    for size, ctx, variants in points:
        for variant in variants:
            if not timing_passes(variant, timing["passes"]):
                continue  # a compiled rung without the training step has nothing to time
            for precision in variant_precisions(variant, timing["precisions"]):
                key = (size, ctx, precision, variant)
                if key not in seen:
                    seen.add(key)
                    jobs.append(dict(zip(("size", "ctx", "precision", "variant"), key, strict=True)))
    return jobs
