"""Jobs asking SLURM for more time than their partition allows are stopped before submission.

sbatch accepts such a job (unless the cluster sets EnforcePartLimits), and it
then pends forever with the reason PartitionTimeLimit while Snakemake waits
for it without a word. So before the first submission the workflow (the
onstart handler in workflow/rules/common.smk) asks `sinfo` each partition's
MaxTime and stops with one sentence naming the setting to lower when any job
to run asks for more.

Torch-free and stdlib-only: it runs on the submit host.
"""

from __future__ import annotations

import re
import shutil
import subprocess

# sinfo's %l: "infinite", "UNLIMITED", "n/a", or [days-]hours:minutes:seconds (or fewer fields).
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def minutes(limit: str) -> float | None:
    """A SLURM time limit in minutes; None for no limit (or one that cannot be read)."""
    match = _TIME.match(limit.strip())
    if not match:
        return None
    days, first, second, third = (int(g) if g else None for g in match.groups())
    if days is not None:  # "D-HH", "D-HH:MM", "D-HH:MM:SS"
        hours, mins, secs = first, second or 0, third or 0
    elif second is None:  # "MM"
        hours, mins, secs = 0, first, 0
    elif third is None:  # "MM:SS"
        hours, mins, secs = 0, first, second
    else:  # "HH:MM:SS"
        hours, mins, secs = first, second, third
    return (days or 0) * 1440 + hours * 60 + mins + secs / 60


def partition_limits(run=subprocess.run) -> tuple[dict[str, float | None], str]:
    """(partition -> MaxTime in minutes or None, the default partition's name); ({}, "") without sinfo."""
    if shutil.which("sinfo") is None:
        return {}, ""
    try:
        out = run(["sinfo", "--noheader", "--format=%P|%l"], capture_output=True, text=True,
                  timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}, ""
    limits, default = {}, ""
    for line in out.splitlines():
        name, _, limit = line.strip().partition("|")
        if not name:
            continue
        if name.endswith("*"):  # sinfo marks the default partition
            name = name[:-1]
            default = name
        limits[name] = minutes(limit)
    return limits, default


def too_long(jobs: list[tuple[str, str, float | None]], limits: dict[str, float | None], default: str) -> str:
    """One sentence about the first job (rule, partition, runtime in minutes) over its partition's
    MaxTime; "" when none is."""
    for rule, partition, runtime in jobs:
        where = partition or default
        limit = limits.get(where)
        if runtime is None or limit is None or runtime <= limit:
            continue
        return (
            f"SLURM would queue the {rule} job with a time limit of {runtime:g} minutes on partition "
            f"{where!r}, whose MaxTime is {limit:g} minutes, and it would wait there forever "
            f"(PartitionTimeLimit): lower lmstudy_max_runtime under default-resources in "
            f"profiles/slurm/config.yaml (or {rule}'s runtime under set-resources, or runtime for "
            f"the jobs without a GPU) to {limit:g} or less, then run again."
        )
    return ""


def before_submission(workflow) -> str:
    """too_long for the jobs a Snakemake `workflow` is about to run through the SLURM executor; "" else."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return ""
    limits, default = partition_limits()
    if not limits:
        return ""
    jobs = [
        (job.rule.name, str(job.resources.get("slurm_partition") or ""), job.resources.get("runtime"))
        for job in workflow.dag.needrun_jobs()
    ]
    return too_long(jobs, limits, default)
