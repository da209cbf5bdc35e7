#!/usr/bin/env python
"""Profile one configuration with both backends and compare per-range GPU totals.

Runs the section-2 job twice, under Nsight Systems and under torch.profiler,
into OUT_DIR/nsys and OUT_DIR/torch, and writes OUT_DIR/comparison.csv (per
pass and range: GPU ns per step by each backend, relative difference, within 5%?).

    python -m lmstudy spec nsys size=small context_length=256 precision=fp32 "passes=[train_step]" \
        backend=nsys > spec.json
    python scripts/compare_backends.py --out-dir results/compare --nsys nsys --spec spec.json

The spec is the nsys job's (its backend is replaced by each in turn), as `lmstudy spec nsys`
completes it from config.yaml.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from lmstudy.cli import run_main, spec_from_text


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", required=True, help="the nsys job's complete spec: a JSON object or file")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--nsys", default="nsys", help="the nsys program")
    args = p.parse_args(argv)
    import pandas as pd

    from lmstudy.analyse.nsys.compare import compare_ranges
    from lmstudy.atomic import write_csv
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.capture import ProfileSpec
    from lmstudy.measure.nsys.executable import NsysMissing
    from lmstudy.measure.nsys.job import run_job
    from lmstudy.measure.spec import from_fields

    spec = from_fields(ProfileSpec, {**spec_from_text(args.spec), "backend": "nsys"})
    try:
        for backend in ("nsys", "torch"):
            records = run_job(dataclasses.replace(spec, backend=backend), args.out_dir / backend, args.nsys)
            for name, record in records.items():
                if record["status"] != "ok":
                    ended = f"the {backend} run's {name} pass ended {record['status']}"
                    raise UserError(f"{ended}: pick a smaller configuration.")
    except NsysMissing as error:
        raise UserError(str(error)) from None
    table = pd.concat(
        [
            compare_ranges(
                pd.read_csv(args.out_dir / "nsys" / name / "ranges.csv"),
                pd.read_csv(args.out_dir / "torch" / name / "ranges.csv"),
            ).assign(**{"pass": name})
            for name in spec.passes
        ],
        ignore_index=True,
    )
    write_csv(args.out_dir / "comparison.csv", table)
    print(table.to_string(index=False))
    print("all ranges within 5%:", bool(table["within_tolerance"].all()))


if __name__ == "__main__":
    run_main(main)
