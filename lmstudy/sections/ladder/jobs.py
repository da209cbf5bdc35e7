"""The optimization ladder's measuring job (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.job_spec import model_fields, noise_fields
from lmstudy.registry import Job


def _ladder(config: dict, w: dict) -> dict:
    ladder = config["ladder"]
    model = model_fields(config, w["size"], w["ctx"], "bf16")
    del model["precision"]  # the rung sets its own
    matmul = ladder["matmul"]
    return {
        **model,
        "rung": w["rung"],
        "warmup_steps": ladder["warmup_steps"],
        "timed_steps": ladder["timed_steps"],
        "profile_steps": ladder["profile_steps"],
        "noise": noise_fields(config),
        "matmul": {
            "sizes": matmul["n"],
            "warmup_s": float(matmul["warmup_s"]),
            "bursts": matmul["bursts"],
            "burst_products": matmul["burst_products"],
        },
    }


def measure(fields: dict, paths: dict):
    """One rung of the ladder and the GPU's matmul ceiling beside it (lmstudy.measure.ladder_bench):
    the rung's row to paths["out"], the ceiling's bursts to paths["matmul_out"]."""
    from lmstudy.errors import UserError
    from lmstudy.ladder_rungs import RUNGS

    if fields["rung"] not in RUNGS:
        raise UserError(f"the spec's rung {fields['rung']!r} is none of the ladder's: {', '.join(RUNGS)}.")
    if fields["timed_steps"] < 2 or fields["warmup_steps"] < 0 or fields["profile_steps"] < 0:
        raise UserError(
            "the spec's timed_steps must be at least 2, warmup_steps and profile_steps at least 0: "
            "fix the spec."
        )
    fields = dict(fields)
    matmul = fields.pop("matmul")
    if min(*matmul["sizes"], matmul["bursts"], matmul["burst_products"]) < 1 or matmul["warmup_s"] < 0:
        raise UserError(
            "the spec's matmul sizes, bursts and burst_products must be at least 1, "
            "warmup_s at least 0: fix the spec."
        )
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.ladder_bench import BenchSpec, CeilingSpec, measure_rung_and_ceiling
    from lmstudy.measure.matmul_ceiling import summarize
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()
    policy = NoisePolicy(**fields.pop("noise"))
    spec = from_fields(BenchSpec, fields)
    ceiling = from_fields(CeilingSpec, matmul)
    row, bursts = measure_rung_and_ceiling(spec, ceiling, policy, clock)
    write_csv(paths["matmul_out"], pd.DataFrame(bursts))
    write_csv(paths["out"], pd.DataFrame([row]))
    detail = (
        f"median {row['median_ms']:.3f} ms, "
        + (f"{row['achieved_tflops']:.3g} TFLOP/s" if row.get("achieved_tflops") else "FLOPs not counted")
        if row["status"] == "ok" else row.get("reason") or row.get("error", "")
    )
    print(f"{spec.size} {row['rung']}: {row['status']} {detail}")
    best = summarize(bursts)
    print(f"matmul ceiling {best['ceiling_tflops']:.4g} TFLOP/s at n={best['n']} "
          f"(median burst {best['median_tflops']:.4g})")
    return clock


JOBS = {
    "ladder": Job(
        wildcards=("size", "ctx", "rung"),
        spec=_ladder,
        runner="lmstudy.sections.ladder.jobs:measure",
        paths=(("out", "CSV of the rung's row"), ("matmul_out", "CSV of the matmul ceiling's bursts")),
        compiles=True,
    ),
}
