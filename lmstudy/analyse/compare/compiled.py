"""Which compared rows were measured under a whole-model torch.compile: one compilation a run.

A job's measuring processes share its inductor cache (lmstudy.cli.compile_from_scratch), so its
later processes measure the kernels the first compiled: they agree with each other, but say nothing
of how far another compilation's choices (Triton configurations picked by timing them) move the
step. Eight compilations of one ladder rung on H200s landed on two kernel choices 12.8% apart,
each job's processes within 0.3% (docs/gpu-checks/2026-11-28.md), so a comparison widens these
rows' intervals to the agreement between compilations (compare.compiled_agreement). Compiled
attention alone (the attention sweep's naive-compile) agreed between compilations as closely as
eager attention did in the same runs, and is not counted here.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.ladder_rungs import RUNGS


def _rung_compiles(key) -> bool:
    rung = RUNGS.get(key) if isinstance(key, str) else None
    return bool(rung and (rung.compile_mode or rung.compile_optimizer or rung.master_weights))


def compiled_once(rows: pd.DataFrame) -> pd.Series:
    """Per row, whether each run measured it from one compilation of the whole model: the compile
    section's compiled mode, a timing variant that compiles, a ladder rung that compiles."""
    compiled = pd.Series(False, index=rows.index)
    if "mode" in rows:
        compiled |= rows["mode"].astype(str).eq("compiled")
    if "variant" in rows:
        compiled |= rows["variant"].astype(str).str.endswith("-compile")
    if "rung_key" in rows:
        compiled |= rows["rung_key"].map(_rung_compiles).astype(bool)
    return compiled
