"""Where a job's own time goes: the study's cost is a result too (the cost section).

Every GPU job writes a small JSON record of its phases beside Snakemake's
benchmark of it (the job's wall time). Whatever the phases do not cover is
Snakemake's own start of the job, writing results and the like.

Torch-free: the measuring scripts write it, the report side reads it.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict

from lmstudy import job_process

# The phases a record may hold, in the order the report shows them.
PHASES = {
    "wait": "taking a GPU lease: asking nvidia-smi, and waiting while another job held the GPU",
    "imports": "interpreter start and imports",
    "model_imports": "importing the model's own code (the factory's module, transformers), once a job where "
                     "that is safe, else in each fresh process",
    "count": "counting the model's parameters and FLOPs (on the meta device, else on the device after "
             "measuring)",
    "start": "starting fresh processes and CUDA",
    "build": "building models",
    "compile": "compiling (torch.compile)",
    "measure": "measuring (warm-up and timed steps)",
    "profile": "profiler capture, export and analysis",
}


# Phases a job spent before its clock was made (the model's code imported by lmstudy.command before
# the runner starts): the next clock takes them, out of its imports.
EARLIER: dict[str, float] = {}


class PhaseClock:
    """Seconds per phase of one job; create it once the job's imports are done."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        # Wall seconds of each round of fresh processes, where the job repeats across processes.
        self.rounds: list[float] = []
        self.min_processes: int | None = None
        now = time.time()
        started_at = now - job_process.seconds_since_process_start()  # NaN where unknown
        # The process began as the GPU lease's wrapper (lmstudy.launch.gpu_lease), which
        # asked nvidia-smi, waited while another job held the GPU, then became
        # this job: that is a phase of its own, not the imports'. A lease time
        # from before this process started is a parent's (nsys's program).
        self.lease = job_process.lease_record()
        leased_at = self.lease["leased_at"]
        if leased_at is not None and started_at == started_at and started_at - 1 <= leased_at <= now:
            self.seconds["wait"] = max(0.0, leased_at - started_at)
            self.seconds["imports"] = now - leased_at
        else:
            self.lease["leased_at"] = started_at if started_at == started_at else None
            if started_at == started_at:
                self.seconds["imports"] = now - started_at
        for phase, seconds in EARLIER.items():
            self.seconds[phase] += seconds
            if "imports" in self.seconds:
                self.seconds["imports"] = max(0.0, self.seconds["imports"] - seconds)
        EARLIER.clear()

    def add_round(self, seconds: float, min_processes: int) -> None:
        """One round of fresh processes (lmstudy.measure.repeat): the repetition's cost, beside the phases."""
        self.rounds.append(max(0.0, seconds))
        self.min_processes = min_processes

    def add(self, phase: str, seconds: float) -> None:
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {list(PHASES)}, not {phase!r}")
        self.seconds[phase] += max(0.0, seconds)

    @contextlib.contextmanager
    def timing(self, phase: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - start)

    def record(self) -> dict:
        """The record to write: each phase's seconds and the process's own wall time."""
        lease = dict(self.lease)
        return {
            "phases": dict(self.seconds),
            "process_s": job_process.seconds_since_process_start(),
            "rounds_s": list(self.rounds),
            "min_processes": self.min_processes,
            # When and where it held the device: the cost section counts the jobs that ran at once.
            "lease": {**lease, "ended_at": time.time()},
        }

    def write(self, path) -> None:
        from lmstudy.atomic import write_json

        write_json(path, self.record())
