"""A job asks nvidia-smi and git once: its fresh measuring processes inherit the answer.

Every measuring process records the environment (lmstudy.environment.describe); the driver, the
commit, the CPU and the GPU's power limit do not change while a job runs, so the job's process
asks once before it forks (lmstudy.measure.repeat.measure_until_stable) and each fresh process
reuses it instead of starting nvidia-smi and git again in its cold start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FAKE_NVIDIA_SMI = """#!/bin/sh
echo "$@" >> "$NVIDIA_SMI_LOG"
echo "580.159.04, 700.00"
"""

PROGRAM = """
import json, os
from lmstudy import environment
from lmstudy.measure.repeat import NoisePolicy, measure_until_stable

def measure(keys, round_index):
    reader, writer = os.pipe()
    if os.fork() == 0:  # a fresh measuring process: what it records of the host
        os.write(writer, json.dumps(environment.host_facts()).encode())
        os._exit(0)
    os.close(writer)
    facts = json.loads(os.read(reader, 65536))
    os.wait()
    return {key: {"samples": [1.0, 1.0], "facts": facts} for key in keys}

results = measure_until_stable(measure, ["a"], lambda r: r["samples"], NoisePolicy(2, 2, 0.05, None),
                               progress=lambda line: None)
print(json.dumps([r["facts"] for r in results["a"]]))
"""


def run(tmp_path: Path, **env) -> tuple[list[dict], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(0o755)
    log = tmp_path / "calls.log"
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "NVIDIA_SMI_LOG": str(log),
        "LMSTUDY_COMMIT": "abc123",
        **env,
    }
    if "LMSTUDY_GPU_INDEX" not in env:
        environ.pop("LMSTUDY_GPU_INDEX", None)
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=REPO, env=environ, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), log.read_text().splitlines()


def test_one_nvidia_smi_call_serves_every_process_of_a_job(tmp_path):
    facts, calls = run(tmp_path)
    assert len(facts) == 2  # two rounds, each a forked process
    for fact in facts:
        assert fact["driver"] == "580.159.04" and fact["gpu_power_limit_w"] == "700.00"
        assert fact["commit"] == "abc123"
    assert len(calls) == 1 and "--query-gpu=driver_version,power.limit" in calls[0]


def test_the_power_limit_is_the_leased_gpus(tmp_path):
    _, calls = run(tmp_path, LMSTUDY_GPU_INDEX="2")
    assert calls[0].split()[:2] == ["-i", "2"]
