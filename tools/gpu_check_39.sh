#!/usr/bin/env bash
# Issue 39's GPU check on one 4-GPU node, across device calls (../shared/gpu/README.md, "Long
# runs"); run from the repository root. Every call ends by collecting what exists into $OUT.
#   call 1:  tools/gpu_check_39.sh start   carry .whl and .gpu-libs (and .base, see below):
#            the GPU measures two ways (scripts/bench_gpu_measures.py, about a minute), then the
#            full preset in the background, one command on every GPU, timed
#   call 2+: tools/gpu_check_39.sh wait    carry nothing; waits up to WAIT_S seconds
#   then:    tools/gpu_check_39.sh quick   carry nothing; once the full study has ended: the
#            quick preset alone on GPU 0 (this branch), and, where .base was carried, the
#            baseline's quick preset on GPU 1 at the same time (same node, side by side)
#   last:    tools/gpu_check_39.sh collect
# Or, on one GPU (nvidia-h200, or GPU 0 of any node), the quick preset alone, one GPU job at a time,
# without the distributed sections (they need 2 GPUs), job-seconds by rule and phase by
# tools/gpu_summary.py (target: at most 300 measuring job-seconds):
#   call 1:  tools/gpu_check_39.sh alone        carry .whl and .gpu-libs (and .base): this branch
#   call 2:  tools/gpu_check_39.sh alone-base   carry nothing: the baseline (.base, e.g. `git archive
#            20686ad`, main before issue 39's second round; BASE_COMMIT=20686ad) on the same GPU,
#            after this branch's run (side by side in time, same card); `wait` between if needed
# The baseline, optional: before call 1, on the machine with the checkout,
#   rm -rf .base && mkdir .base && git archive 5c960be | tar -x -C .base   (main's "Move:" commit)
#   echo /.base/ >> .git/info/exclude
# Read (also printed by `summary`, in $OUT/summary.txt):
#   - measures.txt: per size x precision x pass, busy_ratio_min..max within 0.99..1.01 and
#     kernels_equal True (the in-memory way measures what the trace way does); first_call_s of
#     "events" against "trace" (what a measuring process saves per profiled step)
#   - full: exit 0, wall seconds (target <= 900), GPU-minutes = measuring jobs' wall / 60 (target
#     <= 45), job-seconds by rule and phase, the 2.7B ladder's best rung as a share of the
#     sustained matmul ceiling, the report's summary
#   - quick: job-seconds of this branch (target <= 300) beside the baseline's, by rule and phase
set -uo pipefail
W=${CHECK_DIR:-/tmp/check39}
WAIT_S=${WAIT_S:-560}
started=$(date +%s)
SMK="python3 -m snakemake"
EX=(--exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.pickle' --exclude='*.json.gz' --exclude='*.qdstrm')

copy_tree() {  # the checkout, without the carried folders, into $W/$1
  mkdir -p "$W/$1" && tar --exclude=./.whl --exclude=./.gpu-libs --exclude=./.base -cf - . | tar -xf - -C "$W/$1"
}

wait_for() {  # the file whose presence says a background part ended
  while [ ! -f "$1" ] && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do sleep 5; done
  for log in $W/full.log $W/quick.log $W/base.log; do
    [ -f "$log" ] && echo "== $(basename "$log"): $(grep -c '^Finished jobid' "$log") jobs done; $(tail -1 "$log")"
  done
  cat $W/*_wall.txt 2>/dev/null
}

costs() {  # run folder, run name: the cost table of what ran so far
  local dir=$1 run=$2
  [ -d "$dir/results/$run/benchmarks" ] || return 0
  (cd "$dir" && python3 -m lmstudy study_cost --out "$W/${run}_cost.csv" \
    --benchmarks $(find results/$run/benchmarks -name '*.tsv') \
    --phases $(find results/$run/benchmarks -name '*.phases.json') | tail -1)
}

summary() {
  costs $W/full full; costs $W/quick quick; costs $W/base base
  python3 - "$W" <<'EOF' 2>&1 | tee "$W/summary.txt"
import sys
from pathlib import Path

import pandas as pd

w = Path(sys.argv[1])
phases = ["imports_s", "start_s", "build_s", "compile_s", "measure_s", "profile_s", "other_s"]
for run in ("full", "quick", "base"):
    path = w / f"{run}_cost.csv"
    if not path.exists():
        continue
    jobs = pd.read_csv(path)
    gpu = jobs[jobs["measuring"].astype(str) == "True"]
    print(f"== {run}: {len(jobs)} jobs, {jobs['wall_s'].sum():.0f} job-s, measuring {len(gpu)} jobs "
          f"{gpu['wall_s'].sum():.0f} s = {gpu['wall_s'].sum() / 60:.1f} GPU-min")
    if "started_at" in gpu and gpu["started_at"].notna().any():
        span = gpu["ended_at"].max() - gpu["started_at"].min()
        print(f"   first GPU job start to last GPU job end: {span:.0f} s")
    table = gpu.groupby("rule")[["wall_s", *[p for p in phases if p in gpu]]].sum().round(1)
    table.insert(0, "jobs", gpu.groupby("rule").size())
    print(table.to_string())
    if "gpu_index" in gpu:
        print("   per GPU (s):", gpu.groupby("gpu_index")["wall_s"].sum().round(0).to_dict())
ladder = w / "full/results/full/ladder/ladder.csv"
if ladder.exists():
    rows = pd.read_csv(ladder)
    big = rows[(rows["size"].astype(str) == "2.7B") & rows["share_of_matmul"].notna()]
    if len(big):
        best = big.loc[big["share_of_matmul"].idxmax()]
        print(f"== 2.7B ladder: best rung {best['rung']}: {best['share_of_matmul']:.1%} of the sustained "
              f"matmul ceiling ({best.get('matmul_tflops', float('nan')):.0f} TFLOP/s)")
report = w / "full/report/full/report.md"
if report.exists():
    lines = report.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## Summary")), 0)
    print("== report summary:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    print("\n".join(lines[start:end]))
EOF
}

collect() {
  summary > /dev/null 2>&1 || true
  for part in full quick base; do
    [ -d "$W/$part" ] || continue
    (cd "$W/$part" && tar -czf "$OUT/$part.tar.gz" "${EX[@]}" $(ls -d results logs report 2>/dev/null))
  done
  cp $W/*.csv $W/*.txt "$OUT/" 2>/dev/null
  for log in "$W"/*.log; do [ -f "$log" ] && tail -200 "$log" > "$OUT/$(basename "$log").tail"; done
  ls -la "$OUT"
}

case "${1:-}" in
start)
  mkdir -p $W
  source tools/gpu_env.sh
  export LMSTUDY_COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo i39)}
  export LMSTUDY_GPU_LEASE_DIR=$W/leases
  nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv | tee $W/gpus.txt
  GPUS=$(( $(wc -l < $W/gpus.txt) - 1 )); echo "$GPUS GPUs, $(nproc) cores" | tee -a $W/gpus.txt
  copy_tree full
  if [ -d .base ]; then mkdir -p $W/base && cp -r .base/. $W/base/; fi
  (cd $W/full && CUDA_VISIBLE_DEVICES=0 python3 scripts/bench_gpu_measures.py --out $W/measures.csv \
    --sizes small 2.7B --context-length 256 --precisions fp32 bf16 --repeats 1 > $W/measures.log 2>&1)
  sed -n '/first_call_s/,$p' $W/measures.log | tee $W/measures.txt
  cd $W/full && setsid bash -c '
    t0=$(date +%s)
    '"$SMK"' --cores '"$(nproc)"' --resources gpu='"$GPUS"' --keep-going --config run=full > '$W'/full.log 2>&1
    rc=$?
    echo "full preset: exit $rc, $(( $(date +%s) - t0 )) s wall on '"$GPUS"' GPUs" > '$W'/full_wall.txt
    echo $rc > '$W'/full.rc' < /dev/null > /dev/null 2>&1 &
  cd - > /dev/null
  wait_for $W/full.rc
  collect
  ;;
wait)
  wait_for $W/full.rc
  collect
  ;;
quick)
  source tools/gpu_env.sh > /dev/null 2>&1
  export LMSTUDY_COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo i39)}
  export LMSTUDY_GPU_LEASE_DIR=$W/leases
  wait_for $W/full.rc
  [ -f $W/full.rc ] || { echo "the full study is still running: wait first"; collect; exit 0; }
  copy_tree quick
  run_quick() {  # folder, run name, GPU
    local t0 commit=$LMSTUDY_COMMIT; t0=$(date +%s)
    [ "$2" = base ] && commit=${BASE_COMMIT:-5c960be}
    (cd "$W/$1" && LMSTUDY_COMMIT=$commit LMSTUDY_GPUS=$3 $SMK --cores 8 --resources gpu=1 --config preset=quick run=$2 \
      > "$W/$2.log" 2>&1)
    echo "$2 quick preset on GPU $3: exit $?, $(( $(date +%s) - t0 )) s wall" > "$W/${2}_wall.txt"
  }
  export -f run_quick; export W SMK
  setsid bash -c 'run_quick quick quick 0 & [ -d '$W'/base ] && run_quick base base 1 & wait
    touch '$W'/quick.done' < /dev/null > /dev/null 2>&1 &
  wait_for $W/quick.done
  collect
  ;;
alone|alone-base)
  # One GPU, one GPU job at a time: the quick preset's measuring job-seconds, by rule and phase.
  mkdir -p $W
  source tools/gpu_env.sh > /dev/null 2>&1
  export LMSTUDY_COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo i39)}
  export LMSTUDY_GPU_LEASE_DIR=$W/leases LMSTUDY_GPUS=${GPU:-0}
  nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv | tee $W/gpus.txt
  printf 'comm: {enabled: false}\nddp: {enabled: false}\nsharding: {enabled: false}\n' > $W/one_gpu.yaml
  part=quick; [ "$1" = alone-base ] && part=base
  if [ -f $W/$part.alone.started ]; then  # a second call of the same part only waits for it
    wait_for $W/$part.alone.done; python3 tools/gpu_summary.py $W/$part 2>&1 | tee $W/${part}_alone_summary.txt
    collect; exit 0
  fi
  if [ "$part" = quick ]; then copy_tree quick; if [ -d .base ]; then mkdir -p $W/base && cp -r .base/. $W/base/; fi; fi
  [ -d "$W/$part" ] || { echo "no $W/$part: run 'alone' first, with .base carried"; collect; exit 0; }
  touch $W/$part.alone.started
  commit=$LMSTUDY_COMMIT; [ "$part" = base ] && commit=${BASE_COMMIT:-base}
  (cd $W/$part && setsid bash -c '
    t0=$(date +%s)
    LMSTUDY_COMMIT='"$commit"' '"$SMK"' --cores 8 --resources gpu=1 --configfile '$W'/one_gpu.yaml \
      --config preset=quick run='"$part"' > '$W'/'"$part"'.log 2>&1
    echo "'"$part"' quick preset alone on GPU ${LMSTUDY_GPUS}: exit $?, $(( $(date +%s) - t0 )) s wall" > '$W'/'"$part"'_wall.txt
    touch '$W'/'"$part"'.alone.done' < /dev/null > /dev/null 2>&1 &)
  wait_for $W/$part.alone.done
  python3 tools/gpu_summary.py $W/$part 2>&1 | tee $W/${part}_alone_summary.txt
  collect
  ;;
collect)
  collect
  ;;
summary)
  summary
  ;;
*)
  echo "usage: $0 start|wait|quick|alone|alone-base|collect|summary" >&2; exit 2
  ;;
esac
