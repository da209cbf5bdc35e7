#!/usr/bin/env bash
# Issue 42's GPU check: the quick preset's distributed sections (comm, ddp, sharding) on a node of
# 2 or 4 GPUs with nothing else running on it; run from the repository root in one device call
# (carry .whl as for the other checks: tools/gpu_env.sh). Results, tar'd, to $OUT/gpu_check_42.tar.gz;
# the tables it prints are what to read (see the end).
#   tools/gpu_check_42.sh                 the quick preset's world size (2 processes), one job at a time
#   CHECK42_FOUR=1 tools/gpu_check_42.sh  also 4 processes, on a 4-GPU node (a few minutes more)
set -uo pipefail
source tools/gpu_env.sh
W=/tmp/check42
mkdir -p "$W" "$OUT"
export LMSTUDY_GPU_LEASE_DIR=$W/leases
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
echo "$GPUS GPUs, $(nproc) cores"
nvidia-smi topo -m > "$W/topo.txt" 2>&1; cat "$W/topo.txt"
nvidia-smi nvlink -s -i 0 > "$W/nvlink.txt" 2>&1; head -5 "$W/nvlink.txt"
nvidia-smi --query-gpu=index,name,pcie.link.gen.current,pcie.link.width.current --format=csv > "$W/pcie.txt"
cat "$W/pcie.txt"

# The quick preset's 2 processes; with CHECK42_FOUR=1 on a 4-GPU node, 4 as well. --resources gpu is
# the largest job's: one job at a time, so that no job measures the link beside another.
SIZES="[2]"; LIMIT=2
if [ "${CHECK42_FOUR:-0}" = 1 ] && [ "$GPUS" -ge 4 ]; then SIZES="[2, 4]"; LIMIT=4; fi
cat > "$W/extra.yaml" <<YAML
comm: {world_sizes: $SIZES}
ddp: {world_sizes: $SIZES}
sharding: {world_sizes: $SIZES}
YAML
T0=$(date +%s)
python3 -m snakemake --cores "$(nproc)" --resources gpu="$LIMIT" --configfile "$W/extra.yaml" \
  --config preset=quick run=q42 -- results/q42/comm/comm.csv results/q42/ddp/ddp.csv \
  results/q42/sharding/sharding.csv > "$W/snakemake.log" 2>&1
echo "snakemake: exit $?, $(( $(date +%s) - T0 )) s"; tail -3 "$W/snakemake.log"


python3 - <<'PY' 2>&1 | tee "$W/tables.txt"
import pandas as pd
from pathlib import Path
from lmstudy.sections.comm.tables import bandwidth_table
from lmstudy.sections.ddp.tables import step_table
from lmstudy.sections.sharding.tables import memory_table, step_table as sharding_steps
from lmstudy.sections.comm.findings import FINDINGS as C
from lmstudy.sections.ddp.findings import FINDINGS as D
from lmstudy.sections.sharding.findings import FINDINGS as S
pd.set_option("display.width", 250); pd.set_option("display.max_columns", 30)
r = Path("results/q42")
for name, tables, findings in (("comm", [bandwidth_table], C), ("ddp", [step_table], D),
                               ("sharding", [memory_table, sharding_steps], S)):
    path = r / name / f"{name}.csv"
    if not path.exists():
        print(f"== {name}: no {path}"); continue
    frame = pd.read_csv(path)
    for table in tables:
        print(f"== {name}: {table.__name__}"); print(table(frame).to_string(index=False))
    for finding in findings:
        for sentence in finding(frame):
            print("-", sentence)
PY
cp -r results/q42 logs/q42 "$W/" 2>/dev/null
tar -czf "$OUT/gpu_check_42.tar.gz" -C /tmp check42

# NCCL's data-parallel versions against one process, as the CPU test checks Gloo's.
python3 - > "$W/equality_nccl.txt" 2>&1 <<'PY'
import numpy as np
from lmstudy.measure.distributed import run_group
from lmstudy.measure.distributed_bench import equality_rank, single_process
spec = {"vocab_size": 32, "context_length": 8, "d_model": 16, "d_ff": 32, "num_layers": 2, "num_heads": 2,
        "batch_size": 2, "timed_steps": 3, "versions": ["naive", "flat", "overlapped", "bucketed", "ddp"],
        "bucket_mb": [0.001, 1]}
ranks = run_group(equality_rank, 2, "cuda", spec, "the NCCL equality check")
single = np.array(single_process(spec, 2))
for version in ranks[0]:
    diff = max(float(np.abs(np.array(r[version]) - single).max()) for r in ranks)
    print(f"{version}: max |param - single process| = {diff:.2e}")
PY
cat "$W/equality_nccl.txt"
tar -czf "$OUT/gpu_check_42.tar.gz" -C /tmp check42
ls -la "$OUT"
# What to read:
#  comm bandwidth_table: nccl busbw_gbps at 1000 MB against link_gbps (busbw_of_link; an H100 SXM's 18
#    NVLink links read ~478 GB/s per direction): a large share below 1, well above 1 MB's; gloo on the
#    CPUs far below; rank_spread_ms small against time_ms.
#  ddp step_table: step_ms per version (naive slowest, flat/bucketed/ddp near none + little), comm_share,
#    hidden_share of overlapped/bucketed/ddp.
#  sharding memory_table: state_mb sharded ~ 1/world of whole; allocated_mb/peak_mb after_step lower sharded.
#  equality_nccl.txt: every version within ~1e-5 of one process.
