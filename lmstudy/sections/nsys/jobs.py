"""The Nsight Systems section's jobs (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.job_spec import model_fields
from lmstudy.registry import Job


def _nsys_backend(config: dict, w: dict) -> dict:
    nsys = config["nsys"]
    return {"backend": nsys["backend"], "executable": nsys["executable"], "device": config["device"]}


def _nsys(config: dict, w: dict) -> dict:
    nsys = config["nsys"]
    return {
        **model_fields(config, w["size"], w["ctx"], w["precision"]),
        "passes": nsys["passes"],
        "warmup_steps": nsys["warmup_steps"],
        "profiled_steps": nsys["profiled_steps"],
    }


def settle_backend(fields: dict, paths: dict):
    """Which profiler this machine uses (nsys.backend auto: nsys where it works, else torch.profiler),
    and the nsys program: a JSON answer to paths["out"], which every profile job reads."""
    from lmstudy.atomic import write_json
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.executable import NsysMissing, describe, settle_backend

    try:
        answer = settle_backend(
            fields["backend"], fields["executable"], fields["device"], record=str(paths["out"])
        )
    except NsysMissing as error:
        raise UserError(str(error)) from None
    print(describe(answer), flush=True)
    write_json(paths["out"], answer)


def profile(fields: dict, paths: dict):
    """Profile one configuration's passes in one process and one capture (lmstudy.measure.nsys.job):
    with nsys, lmstudy.measure.nsys.program under `nsys profile` (warm-up left out), else torch.profiler;
    each pass's kernels.csv, ranges.csv and run.json under paths["out_dir"]."""
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.capture import ProfileSpec
    from lmstudy.measure.nsys.executable import NsysMissing, describe, read_answer
    from lmstudy.measure.nsys.job import run_job
    from lmstudy.measure.spec import from_fields
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    fields = dict(fields)
    if paths["backend_record"]:
        answer = read_answer(paths["backend_record"])
        fields["backend"] = answer["backend"]
        fields["nsys"] = answer["executable"] or fields.get("nsys", "nsys")
        print(describe(answer), flush=True)
    elif "backend" not in fields:
        raise UserError("give --backend-record (the nsys_backend job's answer), or name the spec's "
                        'backend ("nsys" or "torch").')
    else:
        print(f"profiling backend: {fields['backend']}", flush=True)
    nsys = fields.pop("nsys", "nsys")
    try:
        records = run_job(from_fields(ProfileSpec, fields), paths["out_dir"], nsys=nsys, clock=clock)
    except NsysMissing as error:
        raise UserError(str(error)) from None
    for name, record in records.items():
        print(name, record["status"], record["error"], "files:", record["files"])
    return clock


JOBS = {
    "nsys_backend": Job(
        wildcards=(),
        spec=_nsys_backend,
        runner="lmstudy.sections.nsys.jobs:settle_backend",
        paths=(("out", "JSON: the profiler this machine uses, and why"),),
        forks=False,
    ),
    "nsys": Job(
        wildcards=("size", "ctx", "precision"),
        spec=_nsys,
        runner="lmstudy.sections.nsys.jobs:profile",
        paths=(
            ("out_dir", "folder of the passes' tables (<pass>/kernels.csv, ranges.csv, run.json)"),
            ("backend_record?", "JSON of the nsys_backend job: the profiler and the nsys program; "
                                "without it the spec names its backend (nsys or torch) and may name nsys"),
        ),
        # torch.profiler's capture runs in a forked process; nsys's in a program of its own, which
        # imports the user's model itself: no model's process to import it once for both.
        model_process=False,
    ),
}
