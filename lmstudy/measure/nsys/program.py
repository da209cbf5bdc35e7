"""The profiled program: every pass's warm-up outside the capture, then N profiled steps of each.

The nsys job (lmstudy.measure.nsys.job) runs it under Nsight Systems on the
job's own spec, written to a JSON file: the same settings as every other
job's, with no defaults of its own (a missing one is named). It calls
cudaProfilerStart/Stop around the profiled steps, so warm-up stays out of a
`--capture-range=cudaProfilerApi` capture; each pass's steps run inside an
NVTX range "profiled pass <pass>". By hand, on a spec `lmstudy spec nsys`
completes:

    python -m lmstudy spec nsys size=small ctx=256 precision=fp32 backend=nsys > spec.json
    nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
        -o small_ctx256 python -m lmstudy.measure.nsys.program --spec spec.json

or under torch.profiler (a spec whose backend is torch, and --trace trace.json.gz).
A whole job, nsys included, with its tables: lmstudy measure nsys.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmstudy.cli import run_main, spec_from_text


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lmstudy.measure.nsys.program",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--spec", required=True,
                   help="the profile's complete settings (lmstudy.measure.nsys.capture.ProfileSpec's "
                        "fields): a JSON object, or a JSON file")
    p.add_argument("--trace", type=Path, help="torch backend: where to write the Chrome trace")
    p.add_argument("--record", type=Path, help="JSON record of the run: per pass, status and environment")
    return p


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    fields = spec_from_text(args.spec)
    from lmstudy.atomic import write_json
    from lmstudy.errors import IncompleteSpec, UserError
    from lmstudy.measure.nsys.capture import ProfileSpec, run_profile
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    try:
        spec = from_fields(ProfileSpec, fields)
    except IncompleteSpec as error:
        raise IncompleteSpec(error.missing, "nsys") from None
    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()
    if spec.backend == "torch" and args.trace is None:
        raise UserError("the torch backend writes a trace: pass --trace PATH (e.g. trace.json.gz).")
    records = run_profile(spec, trace=args.trace, clock=clock)
    if args.record:
        # The launcher (lmstudy.measure.nsys.job) adds the phases to the job's.
        write_json(args.record, {"passes": records, "phases": dict(clock.seconds)})
    for name, record in records.items():
        print(name, record["status"], record["error"], "steps (ms):", record["captured_step_ms"])


if __name__ == "__main__":
    run_main(main)
