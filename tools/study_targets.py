#!/usr/bin/env python
"""The full study's result files in the order tools/gpu_study.sh measures them, one group a line.

1. every timing job of 2.7B and small; 2. every other 2.7B job (Nsight
Systems, memory, compile); 3. attention. The rest follows in one last run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lmstudy import config as study_config  # noqa: E402
from lmstudy import plan  # noqa: E402

root = Path(__file__).resolve().parent.parent
config = study_config.load(yaml.safe_load((root / "config.yaml").read_text()),
                           root / "workflow/schemas/config.schema.yaml")
R = "results/full"
timing = [f"{R}/timing/raw/{j['size']}_ctx{j['ctx']}_{j['precision']}_{j['variant']}.csv"
          for j in plan.timing_configurations(config["timing"]) if j["size"] in ("2.7B", "small")]
big = [f"{R}/nsys/raw/2.7B_ctx{c}_{p}_{config['nsys']['precision']}/run.json"
       for c in config["nsys"]["context_lengths"] for p in config["nsys"]["passes"]]
big += [f"{R}/memory/summary/2.7B_ctx{c}_{p}_{q}/summary.json"
        for c in config["memory"]["context_lengths"] for p in config["memory"]["passes"]
        for q in config["memory"]["precisions"]]
big += [f"{R}/compile/raw/2.7B_ctx{config['compile']['context_length']}_{q}_{a}.csv"
        for q in config["compile"]["precisions"] for a in config["compile"]["attention"]]
attention = [f"{R}/attention/raw/{i}_{q}_d{d}.csv" for i in config["attention"]["implementations"]
             for q in config["attention"]["precisions"] for d in config["attention"]["head_dims"]]
for group in (timing, big, attention):
    print(" ".join(group))
