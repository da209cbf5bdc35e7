#!/usr/bin/env python
"""Profile one configuration's passes (section 2) and write their tables.

With --backend nsys it runs scripts/profile_model.py under `nsys profile`
(capture range: cudaProfilerApi, so warm-up is left out), which profiles
every pass in one process and one capture, exports the report to SQLite and
writes OUT_DIR/<pass>/kernels.csv, ranges.csv and run.json for each pass,
keeping profile/profile.nsys-rep and profile/profile.sqlite. With --backend
torch it profiles with torch.profiler instead (profile/trace.json.gz). In the workflow the backend comes from
--backend-record, the answer of scripts/nsys_backend.py (which settled
nsys.backend `auto` on this kind of machine). Example:

    python scripts/profile_job.py --out-dir results/default/nsys/raw/small_ctx256_fp32 \
        --size small --d-model 768 --d-ff 3072 --num-layers 12 --num-heads 12 \
        --context-length 256 --passes forward train_step --nsys nsys
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_model import add_workload_args, spec_from_args  # noqa: E402

from lmstudy.cli import run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_args(p)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--nsys", default="nsys", help="the nsys program (config: nsys.executable)")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    p.add_argument(
        "--backend-record",
        type=Path,
        help="JSON from scripts/nsys_backend.py; its backend and nsys replace --backend and --nsys",
    )
    args = p.parse_args(argv)
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.executable import NsysMissing, describe
    from lmstudy.measure.nsys.job import run_job
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    if args.backend_record:
        answer = json.loads(args.backend_record.read_text())
        args.backend = answer["backend"]
        args.nsys = answer["executable"] or args.nsys
        print(describe(answer), flush=True)
    else:
        print(f"profiling backend: {args.backend}", flush=True)
    try:
        records = run_job(spec_from_args(args), args.out_dir, nsys=args.nsys, clock=clock)
    except NsysMissing as error:
        raise UserError(str(error)) from None
    if args.phases:
        clock.write(args.phases)
    for name, record in records.items():
        print(name, record["status"], record["error"], "files:", record["files"])


if __name__ == "__main__":
    run_main(main)
