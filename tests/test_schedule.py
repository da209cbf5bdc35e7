"""The order jobs start in: each GPU rule's priority is its job's expected seconds (lmstudy.schedule).

Checked against what the quick preset's jobs cost on an H200 (tests/fixtures/gpu/cost_b9d9ffa):
longer jobs get a higher priority, so on a node of several GPUs the longest start first.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml

from lmstudy import config as study_config
from lmstudy import job_spec, plan, schedule

ROOT = Path(__file__).resolve().parents[1]
COSTS = ROOT / "tests/fixtures/gpu/cost_b9d9ffa/jobs.csv"

# The rule's job name (workflow/rules/*.smk) -> the registry's job and its wildcards.
JOB_NAMES = {
    "time_model": ("timing", r"(?P<size>.+)_ctx(?P<ctx>\d+)_(?P<precision>[^_]+)_(?P<variant>[^_]+)"),
    "attention_sweep": ("attention", r"(?P<impl>[^_]+)_(?P<precision>[^_]+)_d(?P<head_dim>\d+)"),
    "compile_model": ("compile", r"(?P<size>.+)_ctx(?P<ctx>\d+)_(?P<precision>[^_]+)_(?P<attention>[^_]+)"),
    "ladder_rung": ("ladder", r"(?P<size>.+)_ctx(?P<ctx>\d+)_(?P<rung>[^_]+)"),
    "profile_model": ("nsys", r"(?P<size>.+)_ctx(?P<ctx>\d+)_(?P<precision>[^_]+)"),
    "memory_snapshot": (
        "memory",
        r"(?P<size>.+)_ctx(?P<ctx>\d+)_(?P<mempass>forward|train_step)_(?P<precision>.+)",
    ),
}


def study(preset: str) -> dict:
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["preset"] = preset
    return study_config.load(raw, ROOT / "workflow/schemas/config.schema.yaml")


def measured_and_expected() -> list[tuple[str, float, float]]:
    config = study("quick")
    rows = []
    for row in csv.DictReader(COSTS.open()):
        if row["rule"] not in JOB_NAMES:
            continue
        job, pattern = JOB_NAMES[row["rule"]]
        wildcards = re.fullmatch(pattern, row["job"]).groupdict()
        spec = job_spec.job_spec(config, job, wildcards)
        expected = schedule.expected_seconds(job, spec)
        rows.append((f"{row['rule']} {row['job']}", float(row["wall_s"]), expected))
    return rows


def test_the_expected_seconds_are_near_what_the_quick_preset_cost_on_an_h200():
    rows = measured_and_expected()
    assert len(rows) >= 20
    for name, measured, expected in rows:
        assert measured / 2.5 < expected < measured * 2.5, (name, measured, expected)
    total_measured, total_expected = sum(r[1] for r in rows), sum(r[2] for r in rows)
    assert total_expected == pytest.approx(total_measured, rel=0.2)


def test_a_job_that_took_twice_as_long_comes_first():
    rows = measured_and_expected()
    for name_a, measured_a, expected_a in rows:
        for name_b, measured_b, expected_b in rows:
            if measured_a > 2 * measured_b:
                assert expected_a > expected_b, (name_a, name_b)


def test_the_full_study_starts_with_its_longest_jobs():
    config = study("full")
    timing = config["timing"]

    def priority(job, **wildcards):
        value = schedule.priority(job, job_spec.job_spec(config, job, wildcards))
        assert isinstance(value, int) and value >= 0
        return value

    big = priority("timing", size="2.7B", ctx=1024, precision="fp32", variant="naive")
    for configuration in plan.timing_configurations(timing):
        assert priority("timing", **configuration) <= big
    assert priority("timing", size="small", ctx=128, precision="fp32", variant="naive") < big / 5
    assert priority("timing", size="2.7B", ctx=1024, precision="bf16", variant="naive") < big
    # A compiled rung pays its compile on top of its steps; a bigger model costs more.
    ctx = config["ladder"]["context_length"]
    assert priority("ladder", size="2.7B", ctx=ctx, rung="bf16-sdpa-compile") > priority(
        "ladder", size="2.7B", ctx=ctx, rung="bf16-sdpa"
    )
    assert priority("ladder", size="2.7B", ctx=ctx, rung="bf16") > priority(
        "ladder", size="small", ctx=ctx, rung="bf16"
    )
    ctx = config["compile"]["context_length"]
    assert priority("compile", size="2.7B", ctx=ctx, precision="fp32", attention="naive") > priority(
        "compile", size="small", ctx=ctx, precision="fp32", attention="naive"
    )
