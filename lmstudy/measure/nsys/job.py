"""One profiling job: profile a configuration's passes, keep the report, write their tables.

One process profiles every pass (lmstudy.measure.nsys.capture), into one
capture. Files in the job's directory:
- ``profile/``: the profile itself, ``profile.nsys-rep`` and ``profile.sqlite``
  (nsys), or ``trace.json.gz`` (torch.profiler); empty when no pass ran.
  One folder, whichever profiler ran, so that the workflow declares it.
- per pass, ``<pass>/``:
  - ``kernels.csv``: the tidy kernel table (lmstudy.analyse.nsys.events) of
    that pass's part of the capture, one row per (range, kernel), with the
    configuration and the environment on every row;
  - ``ranges.csv``: per range, host time and the GPU work it encloses;
  - ``run.json``: the pass's record: status (ok or OOM), configuration,
    environment, backend, nsys version, and the profile files (relative to
    the record's folder).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from lmstudy import job_process
from lmstudy.analyse.nsys import events as ev
from lmstudy.atomic import write_csv, write_json
from lmstudy.measure.nsys import program
from lmstudy.measure.nsys.capture import ProfileSpec
from lmstudy.measure.nsys.executable import NsysMissing, nsys_version
from lmstudy.phases import PhaseClock

NSYS_TRACE = "cuda,nvtx"
# The job's folder for the profile files, whichever profiler wrote them.
PROFILE_DIR = "profile"


def program_command(spec_file: Path, record: Path) -> list[str]:
    """The profiled program (lmstudy.measure.nsys.program) on the spec in `spec_file`: the job's own
    settings, as a JSON file, so that the program has no second format and no defaults of its own."""
    return [sys.executable, "-m", program.__name__, "--spec", str(spec_file), "--record", str(record)]


def nsys_command(nsys: str, spec_file: Path, report: Path, record: Path) -> list[str]:
    """`nsys profile` of the program on the spec in `spec_file`, capturing only its cudaProfilerApi range."""
    return [
        nsys,
        "profile",
        "-t",
        NSYS_TRACE,
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        # No CPU sampling or context switches: nothing here reads them, and
        # they make the report, its export and the job slower.
        "--sample=none",
        "--cpuctxsw=none",
        "--force-overwrite=true",
        "-o",
        str(report),
        *program_command(spec_file, record),
    ]


def _tables(events: ev.Events, record: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    constant = {k: v for k, v in record.items() if k not in ("captured_step_ms", "error", "files")}
    kernels = ev.kernel_table(events)
    ranges = ev.range_table(events)
    for frame in (kernels, ranges):
        for key, value in constant.items():
            frame[key] = value
    return kernels, ranges


def _no_events() -> ev.Events:
    return ev.Events(
        pd.DataFrame(columns=ev.RANGE_COLUMNS),
        pd.DataFrame(columns=ev.LAUNCH_COLUMNS),
        pd.DataFrame(columns=ev.ACTIVITY_COLUMNS),
    )


def write_passes(
    out_dir: Path, records: dict[str, dict], events: ev.Events | None, files: list[Path]
) -> None:
    """Each pass's tables and record, from its part of the capture (`events`; None: nothing captured).

    A pass that ran out of memory gets empty tables and no files; one that
    ran has its range in the capture, or the capture is not this program's.
    """
    passes = ev.split_by_pass(events) if events is not None else {}
    for name, record in records.items():
        folder = out_dir / name
        record["files"] = []
        if record["status"] == "ok":
            if name not in passes:
                raise RuntimeError(
                    f"the capture has no range 'profiled pass {name}' for the {name} pass, which ran"
                    + (f" ({events.note})" if events is not None and events.note else "")
                )
            record["files"] = [os.path.relpath(path, folder) for path in files]
            kernels, ranges = _tables(passes[name], record)
        else:
            kernels, ranges = _tables(_no_events(), record)
        write_csv(folder / "kernels.csv", kernels)
        write_csv(folder / "ranges.csv", ranges)
        write_json(folder / "run.json", record)


def run_torch(spec: ProfileSpec, out_dir: Path, clock: PhaseClock) -> dict[str, dict]:
    from lmstudy.analyse.nsys import torch_trace
    from lmstudy.measure.repeat import forked_with_phases

    trace = out_dir / PROFILE_DIR / "trace.json.gz"
    trace.unlink(missing_ok=True)
    # In a fresh process, as nsys's profiled program is: a model that crashes or exits there is named
    # in one sentence (lmstudy.measure.fresh_process), and this process stays off the device.
    records = forked_with_phases(_profile, spec, str(trace), clock=clock, what="the profiled process")
    for record in records.values():
        record["nsys_version"] = ""
    with clock.timing("profile"):
        captured = trace.exists()
        events = torch_trace.read_events(trace) if captured else None
        write_passes(out_dir, records, events, [trace] if captured else [])
    return records


def _program_failed(returncode: int) -> Exception:
    """The profiled program ended without its record: a user's model is named in one sentence (as a
    forked measuring process names it), the study's own failure keeps its log."""
    from lmstudy.errors import UserError
    from lmstudy.measure import fresh_process

    if fresh_process.MODEL_FACTORY is None:
        return RuntimeError(f"the profiled program failed (nsys exit {returncode}); see the log above")
    return UserError(
        f"the model of factory {fresh_process.MODEL_FACTORY!r} ended the program nsys profiled without "
        f"its record (nsys exit {returncode}; the program's own output is above): a model must return "
        "its logits and leave the process to the study (nothing of this job was written; fix the model, "
        "or measure it without the part that does this)."
    )


def _profile(spec: ProfileSpec, trace: str, phases) -> dict[str, dict]:
    from lmstudy.measure.nsys.capture import run_profile

    return run_profile(spec, trace=Path(trace), clock=phases)


def check_nsys(spec: ProfileSpec, nsys: str) -> str:
    """nsys's version line; when nsys is missing on a machine without CUDA, say that first.

    A GPU preset on a CPU machine lacks both; the device is the thing to fix
    (run the smoke preset), not nsys. CUDA is asked about only then, so
    that this process, the parent of the profiled one, stays off the GPU.
    """
    try:
        return nsys_version(nsys)
    except NsysMissing:
        if spec.device == "cuda":
            from lmstudy.measure.devices import require_cuda

            require_cuda()
        raise


def run_nsys(spec: ProfileSpec, out_dir: Path, nsys: str, clock: PhaseClock) -> dict[str, dict]:
    from lmstudy.analyse.nsys import sqlite

    started = time.perf_counter()
    version = check_nsys(spec, nsys)
    report = out_dir / PROFILE_DIR / "profile.nsys-rep"
    export = out_dir / PROFILE_DIR / "profile.sqlite"
    record_path = out_dir / "program.json"
    spec_file = out_dir / "program_spec.json"
    for path in (report, export, record_path):
        path.unlink(missing_ok=True)
    write_json(spec_file, spec_dict(spec))
    command = nsys_command(nsys, spec_file, report.with_suffix(""), record_path)
    print("+", " ".join(command), flush=True)
    # nsys and the profiled program hold the job's GPU lease too (lmstudy.launch.gpu_lease).
    done = subprocess.run(command, pass_fds=job_process.inherited_fds())
    if not record_path.exists():
        raise _program_failed(done.returncode)
    ran = json.loads(record_path.read_text())
    record_path.unlink()
    spec_file.unlink()
    # The profiled program's own phases; the rest of nsys's run is the profiler's.
    phases = ran.pop("phases", {})
    for phase, seconds in phases.items():
        clock.add(phase, seconds)
    clock.add("profile", time.perf_counter() - started - sum(phases.values()))
    records = ran["passes"]
    for record in records.values():
        record["nsys_version"] = version
    with clock.timing("profile"):
        events, files = None, []
        if any(record["status"] == "ok" for record in records.values()):
            if not report.exists():
                raise RuntimeError(
                    f"nsys wrote no report {report} (exit {done.returncode}); see the log above"
                )
            sqlite.export_sqlite(report, nsys, export)
            events, files = sqlite.read_events(export), [report, export]
        write_passes(out_dir, records, events, files)
    return records


def run_job(
    spec: ProfileSpec, out_dir: Path, nsys: str = "nsys", clock: PhaseClock | None = None
) -> dict[str, dict]:
    """Profile every pass of `spec` in one process; the records by pass (also in <pass>/run.json)."""
    out_dir = Path(out_dir)
    (out_dir / PROFILE_DIR).mkdir(parents=True, exist_ok=True)
    clock = clock or PhaseClock()
    if spec.backend == "nsys":
        return run_nsys(spec, out_dir, nsys, clock)
    return run_torch(spec, out_dir, clock)


def spec_dict(spec: ProfileSpec) -> dict:
    return dataclasses.asdict(spec)
