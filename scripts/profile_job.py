#!/usr/bin/env python
"""Profile one configuration's passes (section 2) and write their tables.

With --backend nsys it runs scripts/profile_model.py under `nsys profile`
(capture range: cudaProfilerApi, so warm-up is left out), which profiles
every pass in one process and one capture, exports the report to SQLite and
writes OUT_DIR/<pass>/kernels.csv, ranges.csv and run.json for each pass,
keeping profile/profile.nsys-rep and profile/profile.sqlite. With --backend
torch it profiles with torch.profiler instead (profile/trace.json.gz). In the workflow the backend comes from
--backend-record, the answer of scripts/nsys_backend.py (which settled
nsys.backend `auto` on this kind of machine). Example (the rest of the spec
from config.yaml, as the workflow's jobs):

    python scripts/profile_job.py --out-dir results/default/nsys/raw/small_ctx256_fp32 \
        --spec '{"size": "small", "context_length": 256, "precision": "fp32"}' --backend nsys
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import add_spec_arguments, read_spec, run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_arguments(p, "nsys")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    profiler = p.add_mutually_exclusive_group(required=True)
    profiler.add_argument(
        "--backend-record",
        type=Path,
        help="JSON from scripts/nsys_backend.py: the backend and the nsys program to use",
    )
    profiler.add_argument("--backend", choices=["nsys", "torch"], help="by hand: the profiler")
    p.add_argument("--nsys", default="nsys", help="by hand, with --backend nsys: the nsys program")
    args = p.parse_args(argv)
    fields = read_spec(args, "nsys")
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.capture import ProfileSpec
    from lmstudy.measure.nsys.executable import NsysMissing, describe
    from lmstudy.measure.nsys.job import run_job
    from lmstudy.measure.spec import from_fields
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    if args.backend_record:
        from lmstudy.analyse.result_files import read_json

        answer = read_json(args.backend_record)
        args.backend = answer["backend"]
        args.nsys = answer["executable"] or args.nsys
        print(describe(answer), flush=True)
    else:
        print(f"profiling backend: {args.backend}", flush=True)
    try:
        spec = from_fields(ProfileSpec, {**fields, "backend": args.backend})
        records = run_job(spec, args.out_dir, nsys=args.nsys, clock=clock)
    except NsysMissing as error:
        raise UserError(str(error)) from None
    if args.phases:
        clock.write(args.phases)
    for name, record in records.items():
        print(name, record["status"], record["error"], "files:", record["files"])


if __name__ == "__main__":
    run_main(main)
