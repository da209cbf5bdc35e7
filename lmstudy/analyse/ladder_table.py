"""The ladder's table: every rung's row beside the dense bf16 matmul rate measured in the same run.

The reference is the highest rate the matmul runs showed (a short burst, a
sustained run, and in scripts/bench_ladder.py a burst after the rungs too):
a rung's share is never counted against a rate the GPU showed it could beat.
Shares compare within one run only; the rate itself differs from one GPU
of a model to the next (README: the ladder benchmark).

Torch-free: the workflow's aggregate job (scripts/ladder_table.py) and the
hand-run benchmark (lmstudy.measure.ladder_bench.run_bench) both join here.
"""

from __future__ import annotations

import pandas as pd

# Per kind of matmul run ("burst", "sustained", ...): its rate, as a column of every rung row.
KIND_COLUMN = "matmul_{kind}_tflops"


def reference_tflops(matmul: pd.DataFrame) -> float:
    """The highest rate of the matmul runs (NaN without any)."""
    rates = pd.to_numeric(matmul["tflops"], errors="coerce") if "tflops" in matmul else pd.Series(dtype=float)
    return float(rates.max()) if rates.notna().any() else float("nan")


def join(rungs: pd.DataFrame, matmul: pd.DataFrame) -> pd.DataFrame:
    """`rungs` with the matmul rates of the run and each rung's share of the reference.

    Columns added: matmul_n, matmul_<kind>_tflops for each kind of run,
    matmul_tflops (the reference) and share_of_matmul (a rung that did not
    run, OOM or unsupported, has none).
    """
    out = rungs.copy()
    reference = reference_tflops(matmul)
    if "n" in matmul and len(matmul):
        out["matmul_n"] = int(matmul["n"].iloc[0])
    for kind, part in matmul.groupby("kind", sort=False) if "kind" in matmul else ():
        out[KIND_COLUMN.format(kind=kind)] = float(part["tflops"].max())
    out["matmul_tflops"] = reference
    ok = out["status"] == "ok" if "status" in out else pd.Series(False, index=out.index)
    achieved = pd.to_numeric(out.get("achieved_tflops", pd.Series(float("nan"), index=out.index)))
    out["share_of_matmul"] = (achieved / reference).where(ok)
    return out
