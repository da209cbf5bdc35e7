#!/usr/bin/env python
"""On a CUDA machine: the check before every fork (lmstudy.measure.fresh_process) refuses a parent whose
CUDA was started, by torch or at the driver, and lets an untouched one fork. Prints one JSON line a case.

    python tools/check_fork_guard.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE = """
import ctypes, json, os, sys
from lmstudy.measure import fresh_process
fresh_process.mark_forking_parent()
import torch
fresh_process.watch_cuda_start()
how = {how!r}
if how == "torch.cuda.init":
    torch.cuda.init()
elif how == "tensor on cuda":
    torch.zeros(1, device="cuda")
elif how == "is_available without NVML":
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "0"
    torch.cuda.is_available()
elif how == "cuInit by ctypes":
    ctypes.CDLL("libcuda.so.1").cuInit(0)
elif how == "is_available through NVML":
    torch.cuda.is_available()

def child():
    return {{"device": torch.cuda.get_device_name(0), "sum": float(torch.ones(4, device="cuda").sum())}}

try:
    print(json.dumps({{"case": how, "forked": fresh_process.run_forked(child, what="the test process")}}))
except fresh_process.CudaStartedInParent as refused:
    print(json.dumps({{"case": how, "refused": str(refused)}}))
"""
EXPECTED_REFUSED = {"torch.cuda.init", "tensor on cuda", "is_available without NVML", "cuInit by ctypes"}


def main() -> None:
    import argparse

    formatter = argparse.RawDescriptionHelpFormatter
    argparse.ArgumentParser(description=__doc__, formatter_class=formatter).parse_args()
    failures = 0
    for how in ("untouched", "is_available through NVML", *sorted(EXPECTED_REFUSED)):
        # each case imports this checkout's lmstudy
        paths = (str(ROOT), os.environ.get("PYTHONPATH"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
        done = subprocess.run([sys.executable, "-c", CASE.format(how=how)],
                              capture_output=True, text=True, timeout=300, env=env)
        line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else json.dumps(
            {"case": how, "crashed": done.stderr[-2000:]})
        result = json.loads(line)
        ok = ("refused" in result) == (how in EXPECTED_REFUSED) and "crashed" not in result
        failures += not ok
        print(json.dumps({**result, "as_expected": ok}), flush=True)
    print(f"fork guard: {6 - failures} of 6 cases as expected")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
