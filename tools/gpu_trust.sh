#!/usr/bin/env bash
# The trust checks on one GPU, across device calls (../shared/gpu/README.md, "Long runs");
# run from the repository root.
#   first: tools/gpu_trust.sh hand     carry .whl and .gpu-libs: one job of each section that
#           times steps, run by hand, its rows printed
#   call 1: tools/gpu_trust.sh check   carry .whl and .gpu-libs: one job of each section
#           that times steps, by hand (a minute), then in the background: the quick
#           preset twice from clean copies (runs qa and qb: an A/A comparison), the
#           timing section again at batch 8 (run qb8: a real difference), and the
#           comparisons qa_vs_qb and qa_vs_qb8
#   calls 2+: tools/gpu_trust.sh wait   carry nothing; waits up to WAIT_S seconds
#   last:    tools/gpu_trust.sh collect  tables, logs and reports (no exports, snapshots) to $OUT
set -uo pipefail
W=/tmp/trust
WAIT_S=${WAIT_S:-540}
started=$(date +%s)

wait_for_runs() {
  while [ ! -f $W/runs.rc ] && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do sleep 5; done
  for log in $W/run_*.log; do
    [ -f "$log" ] && echo "== $(basename "$log"): $(grep -c '^Finished jobid' "$log") jobs done; $(tail -1 "$log")"
  done
  cat $W/walls.txt 2>/dev/null
  [ -f $W/runs.rc ] && echo "runs ended: $(cat $W/runs.rc)"
}

copy_tree() {  # the checkout, without the carried folders, into $W/$1
  mkdir -p $W/$1 && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$1
}

runs() {  # in $W/study: qa, qb (quick preset), qb8 (timing at batch 8), then the comparisons
  cd $W/study || return 1
  for run in qa qb; do
    t0=$(date +%s)
    python3 -m snakemake --cores 1 --resources gpu=1 --keep-going --config preset=quick run=$run \
      > $W/run_$run.log 2>&1
    echo "$run: exit $?, $(( $(date +%s) - t0 )) s" >> $W/walls.txt
  done
  t0=$(date +%s)
  python3 -m snakemake --cores 1 --resources gpu=1 --keep-going --config preset=quick run=qb8 batch_size=8 \
    -- results/qb8/timing/timing.csv > $W/run_qb8.log 2>&1
  echo "qb8 (timing, batch 8): exit $?, $(( $(date +%s) - t0 )) s" >> $W/walls.txt
  python3 -m snakemake --cores 1 --config preset=quick -- report/compare/qa_vs_qb/index.html \
    report/compare/qa_vs_qb8/index.html > $W/run_compare.log 2>&1
  echo "comparisons: exit $?" >> $W/walls.txt
}

handcheck() {  # one job of each section that times steps, by hand, into $W/hand
  mkdir -p $W/hand
  # Complete specs from the quick preset (lmstudy spec), with the values of each check laid over.
  spec() { python3 -m lmstudy spec "$@" --preset quick; }
  python3 -m lmstudy measure timing --out $W/hand/timing_small.csv --spec "$(spec timing size=small \
    context_length=128 precision=bf16 variant=naive 'warmup_steps=[0, 1, 5]' timed_steps=10)" || return 1
  python3 -m lmstudy measure timing --out $W/hand/timing_27b.csv --spec "$(spec timing size=2.7B \
    context_length=256 precision=fp32 variant=naive 'passes=[forward]' 'warmup_steps=[0, 5]' timed_steps=10)" \
    || return 1
  python3 -m lmstudy measure ladder --out $W/hand/rung.csv --matmul-out $W/hand/matmul.csv --spec "$(spec \
    ladder size=small context_length=256 rung=bf16 warmup_steps=5 timed_steps=20 profile_steps=2)" || return 1
  python3 -m lmstudy measure attention --out $W/hand/attention.csv --spec "$(spec attention \
    implementation=naive precision=fp32 head_dim=64 'seq_lens=[1024, 4096]' steps=20 warmup=3)" || return 1
  python3 - <<'PY'
import pandas as pd
for name in ("timing_small", "timing_27b", "rung", "attention"):
    f = pd.read_csv(f"/tmp/trust/hand/{name}.csv")
    cols = [c for c in ("pass", "warmup_steps", "rung_key", "seq_len", "status", "processes", "median_ms",
                        "ci_low_ms", "ci_high_ms", "process_spread", "gpu_busy_share", "sm_clock_mhz",
                        "power_w", "power_limit_w", "forward_median_ms", "forward_ci_low_ms",
                        "forward_ci_high_ms", "forward_process_spread") if c in f]
    print(name); print(f[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
PY
}

case "${1:-}" in
hand)
  mkdir -p $W
  source tools/gpu_env.sh
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee $W/gpu.txt
  python3 -c "import pynvml; pynvml.nvmlInit(); print('NVML', pynvml.nvmlSystemGetDriverVersion())"
  t0=$(date +%s); handcheck > $W/hand.log 2>&1; echo "hand check: exit $?, $(( $(date +%s) - t0 )) s"
  cat $W/hand.log | grep -v "^process\|^round" | tail -60
  cp $W/hand/*.csv "$OUT/" 2>/dev/null; cp $W/hand.log "$OUT/"
  ;;
check)
  mkdir -p $W
  source tools/gpu_env.sh
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee $W/gpu.txt
  python3 -c "import pynvml; pynvml.nvmlInit(); print('NVML', pynvml.nvmlSystemGetDriverVersion())"
  copy_tree study
  (cd $W/study && export -f runs && export W && setsid bash -c "runs; echo \$? > $W/runs.rc" \
    < /dev/null > /dev/null 2>&1 &)
  echo "runs started in the background"
  wait_for_runs
  ;;
wait)
  wait_for_runs
  ;;
collect)
  wait_for_runs
  source tools/gpu_env.sh > /dev/null 2>&1
  tar -czf "$OUT/trust.tar.gz" -C $W/study --exclude='*.nsys-rep' --exclude='*.sqlite' \
    --exclude='*.pickle' --exclude='*.json.gz' --exclude='raw/*/profile' results logs report
  cat $W/gpu.txt $W/walls.txt $W/run_*.log > "$OUT/logs.txt" 2>/dev/null
  ;;
*)
  echo "usage: $0 check|wait|collect" >&2; exit 2
  ;;
esac
