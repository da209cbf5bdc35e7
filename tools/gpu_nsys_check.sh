#!/usr/bin/env bash
# Section 2 on a GPU, in one go (run from the repository root):
#   1. the quick preset's nsys section through Snakemake, with nsys at $NSYS;
#   2. both backends on small ctx 256 training step, per-range GPU totals compared.
# Everything worth keeping is copied under ${OUT:-gpu_nsys_out}.
#   usage: NSYS=/path/to/nsys tools/gpu_nsys_check.sh
set -uo pipefail
out=${OUT:-gpu_nsys_out}
nsys=${NSYS:-nsys}
mkdir -p "$out"
"$nsys" --version > "$out/nsys_version.txt" 2>&1
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
cat > "$out/override.yaml" <<YAML
preset: quick
run: gpu-quick
nsys: {executable: "$nsys"}
YAML
python3 -m snakemake --cores 1 --resources gpu=1 --configfile config.yaml "$out/override.yaml" \
  --until aggregate_nsys aggregate_timing > "$out/snakemake_nsys.log" 2>&1
echo "snakemake exit $?" >> "$out/snakemake_nsys.log"
python3 -m lmstudy make_figures --section nsys --results results/gpu-quick \
  --out "$out/figures" >> "$out/snakemake_nsys.log" 2>&1
python3 - > "$out/section.txt" 2>&1 <<'PY'
from pathlib import Path
from lmstudy.report.render import Findings, Table
from lmstudy.sections import nsys
import os
out = Path(os.environ.get("OUT", "gpu_nsys_out"))
built = nsys.build(Path("results/gpu-quick"), out / "figures")
for block in built.blocks:
    if isinstance(block, Findings):
        print("\n".join("- " + item for item in block.items))
    elif isinstance(block, Table):
        print("\n##", block.caption)
        print(block.frame.to_string(index=False, max_colwidth=70))
PY
cp -r results/gpu-quick/nsys/kernels.csv results/gpu-quick/nsys/ranges.csv \
  results/gpu-quick/nsys/runs.csv "$out/" 2>/dev/null
cp -r logs/gpu-quick/nsys "$out/logs" 2>/dev/null
# One small export of the quick run, to look at by hand (and as a future fixture).
cp results/gpu-quick/nsys/raw/small_ctx256_fp32/profile/profile.sqlite "$out/" 2>/dev/null
python3 -m lmstudy spec nsys size=small context_length=256 precision=fp32 "passes=[train_step]" \
  warmup_steps=3 profiled_steps=3 backend=nsys > results/gpu-compare-spec.json
python3 scripts/compare_backends.py --out-dir results/gpu-compare --nsys "$nsys" \
  --spec results/gpu-compare-spec.json > "$out/compare.txt" 2>&1
echo "compare exit $?" >> "$out/compare.txt"
cp results/gpu-compare/comparison.csv "$out/" 2>/dev/null
for b in nsys torch; do
  mkdir -p "$out/compare_$b"
  cp results/gpu-compare/$b/train_step/kernels.csv results/gpu-compare/$b/train_step/ranges.csv \
    results/gpu-compare/$b/train_step/run.json "$out/compare_$b/" 2>/dev/null
done
ls -la "$out"
