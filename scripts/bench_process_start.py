#!/usr/bin/env python
"""What a fresh measuring process costs before its first step: spawned vs forked.

Spawned (the old way): a new interpreter that imports torch, initialises
CUDA and builds the model. Forked (lmstudy.measure.fresh_process, the timing
section's way): a child of a process that already imported torch and never
touched CUDA; it initialises CUDA and builds the model. The interpreter's
start and the imports are not part of a cold start; CUDA initialisation and
the model build are, in both.

    python scripts/bench_process_start.py --out start.csv --sizes small 2.7B --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import run_main  # noqa: E402

# This process forks measuring ones: availability checks go through NVML, not the CUDA driver.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
SIZES = {
    "small": dict(d_model=768, d_ff=3072, num_layers=12, num_heads=12),
    "2.7B": dict(d_model=2560, d_ff=10240, num_layers=32, num_heads=32),
}
CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
import torch
from lmstudy.job_process import seconds_since_process_start
from lmstudy.measure.bench_process import cold_start
imports_s = seconds_since_process_start()
result = cold_start(json.loads({spec!r}))
result["imports_s"] = imports_s
print(json.dumps(result))
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sizes", nargs="+", default=["small", "2.7B"], choices=list(SIZES))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args(argv)
    import pandas as pd
    import torch  # noqa: F401 - the forked children start with it imported

    from lmstudy.atomic import write_csv
    from lmstudy.measure.bench_process import cold_start
    from lmstudy.measure.fresh_process import run_forked
    from lmstudy.measure.steps import import_lazy_modules

    import_lazy_modules()  # the forked children inherit it, as the timing jobs' do
    root = str(Path(__file__).resolve().parent.parent)
    rows = []
    for size in args.sizes:
        spec = {**SIZES[size], "device": args.device}
        for repeat in range(args.repeats):
            for method in ("spawned", "forked"):
                start = time.perf_counter()
                if method == "spawned":
                    code = CHILD.format(root=root, spec=json.dumps(spec))
                    done = subprocess.run(
                        [sys.executable, "-c", code], capture_output=True, text=True, check=True
                    )
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                else:
                    result = run_forked(cold_start, spec, what=f"the forked {size} process")
                    result["imports_s"] = 0.0
                wall = time.perf_counter() - start
                rows.append({"size": size, "method": method, "repeat": repeat, "process_s": wall, **result})
                print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    write_csv(args.out, table)
    summary = table.groupby(["size", "method"])[
        ["process_s", "imports_s", "cuda_init_s", "build_s"]].median().round(3)
    print(summary.to_string())


if __name__ == "__main__":
    run_main(main)
