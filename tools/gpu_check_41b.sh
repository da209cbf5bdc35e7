#!/usr/bin/env bash
# Issue 41 step 2 (rates, the nsys program's spec, the CPU side's commands) on one GPU of a node:
# the quick preset's timing, nsys, compile, attention and ladder sections and the report, then
# the numbers to read. Run from the repository root; everything lands in $OUT.
#   bash tools/gpu_check_41b.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m snakemake --cores 4 --resources gpu=1 --keep-going --config preset=quick run=r41 \
  > "$OUT/snakemake.log" 2>&1; echo "snakemake exit $?" > "$OUT/rc.txt"
python3 - > "$OUT/check.txt" 2>&1 <<'PY'
import glob, json, math
import pandas as pd
import yaml
from lmstudy import rates
R = "results/r41"
# 1. Rates: every ok row's tokens/s, TFLOP/s and MFU are lmstudy.rates' of its own median and FLOPs.
for table in ("timing/timing.csv", "compile/compile.csv"):
    t = pd.read_csv(f"{R}/{table}"); t = t[t.status == "ok"]
    got = rates.step_rates(t.median_ms, tokens=t.batch_size * t.context_length,
                           flops=t.flops_per_step, peak_tflops=t.peak_tflops)
    worst = max(float(((got[c] - t[c]).abs() / t[c].abs()).max()) for c in got)
    print(table, len(t), "rows; worst relative difference", worst, "; MFU range", t.mfu.min(), t.mfu.max())
# 2. The nsys program ran on the job's spec: each pass's warm-up is config.yaml's nsys.warmup_steps.
from lmstudy import config as c
base = yaml.safe_load(open("config.yaml")); base["preset"] = "quick"
want = c.load(base, "workflow/schemas/config.schema.yaml")["nsys"]["warmup_steps"]
runs = [json.load(open(p)) for p in glob.glob(f"{R}/nsys/raw/*/*/run.json")]
print("nsys passes", len(runs), "warmup_steps seen", sorted({r["warmup_steps"] for r in runs}), "want", want,
      "statuses", sorted({r["status"] for r in runs}), "backends", sorted({r["backend"] for r in runs}))
PY
grep -h "lmstudy_cpu\|Error\|error:" logs/r41/*.log logs/r41/*/*.log 2>/dev/null | head -20 > "$OUT/errors.txt"
cp report/r41/index.html report/r41/report.md "$OUT/" 2>/dev/null
cat "$OUT/rc.txt" "$OUT/check.txt"
