#!/usr/bin/env bash
# The GPU checks of issues 29 and 30 on one-GPU machines, across device calls
# (../shared/gpu/README.md, "Long runs"); run from the repository root.
#   machine 1, call 1: tools/gpu_session.sh m1   carry .whl and .gpu-libs: the fork guard,
#        the start methods' cost, the job server's saving; then in the background three
#        quick runs at once on the one GPU (their jobs take turns through the lease):
#        qa and qb of the built-in model (A/A) and ql of a Hugging Face Llama
#   machine 2, call 1: tools/gpu_session.sh m2   carry .whl and .gpu-libs: the module
#        ranges' cost; then in the background the quick run qf of a model from a file
#        and the timing section at batch 9 and at batch 10 (A/B), at once
#   issue 33: tools/gpu_session.sh q2 (2 GPUs), then wait, qf, compare, collect
#   calls 2+: tools/gpu_session.sh wait          carry nothing
#   last:     tools/gpu_session.sh collect       tables, records and logs to $OUT
set -uo pipefail
W=/tmp/w
WAIT_S=${WAIT_S:-540}
started=$(date +%s)
LLAMA="model={factory: 'lmstudy.measure.hf_factory:llama', name: llama}"
ENCODER="model={factory: 'tests/fixtures/models/encoder_lm.py:build', name: encoder-lm}"

copy_tree() { mkdir -p $W/$1 && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$1; }

study() {  # copy name, then snakemake's arguments
  local name=$1; shift
  (cd $W/$name && python3 -m snakemake --cores 2 --resources gpu=1 \
     --keep-going "$@" > $W/$name.log 2>&1; echo $? > $W/$name.rc)
}

wait_all() {
  while [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do
    pending=0; for f in $W/*.log; do [ -f "${f%.log}.rc" ] || pending=1; done
    [ $pending = 0 ] && break; sleep 5
  done
  for f in $W/*.log; do
    n=$(basename "$f" .log)
    echo "== $n: $(grep -c '^Finished jobid' "$f") jobs done, rc $(cat $W/$n.rc 2>/dev/null || echo running)"
    grep -E "^Error in rule|error:" "$f" | head -3; tail -1 "$f"
  done
}

setup() {
  mkdir -p $W; source tools/gpu_env.sh
  export LMSTUDY_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee $W/gpu.txt
}

background() { export -f study; export W; setsid bash -c "$1" < /dev/null > /dev/null 2>&1 & }

TINY_JOB='{"size": "small", "context_length": 128, "precision": "bf16", "variant": "naive", "passes": ["forward"], "noise": {"min_processes": 1, "max_processes": 1, "max_spread": 0.05, "min_gpu_busy": 0.85}}'

case "${1:-}" in
m1)
  setup
  python3 tools/check_fork_guard.py 2>&1 | tee $W/fork_guard.txt
  python3 scripts/bench_process_start.py --out $W/process_start.csv --sizes small 2.7B --repeats 3 \
    2>&1 | grep -v '^{' | tee $W/process_start.txt
  python3 scripts/bench_job_server.py --gpu --out $W/job_server.csv --repeats 3 -- -m lmstudy measure timing \
    --spec "$(python3 -m lmstudy spec timing --spec "$TINY_JOB" --preset quick)" --out $W/tiny.csv 2>&1 \
    | grep -v "^{" | tee $W/job_server.txt
  for r in qa qb ql; do copy_tree $r; done
  background "study qa --config preset=quick run=qa & study qb --config preset=quick run=qb & \
    study ql --config preset=quick run=ql \"$LLAMA\" & wait"
  sleep 20; wait_all ;;
m2)
  setup
  python3 scripts/bench_module_ranges.py --out $W/module_ranges.csv --size small --context-length 256 \
    --precision bf16 --repeats 3 2>&1 | grep -v '^{' | tee $W/module_ranges.txt
  for r in qf b9 b10; do copy_tree $r; done
  background "study qf --config preset=quick run=qf \"$ENCODER\" & \
    study b9 results/b9/timing/timing.csv --config preset=quick run=b9 batch_size=9 & \
    study b10 results/b10/timing/timing.csv --config preset=quick run=b10 batch_size=10 & wait"
  sleep 20; wait_all ;;
q2)  # issue 33 (and 29): the quick preset of the built-in model and of a Llama, side by side on 2 GPUs
  setup
  for r in qa ql; do copy_tree $r; done
  background "study qa --cores 6 --config preset=quick run=qa & \
    study ql --cores 6 --config preset=quick run=ql \"$LLAMA\" & wait"
  sleep 20; wait_all ;;
qf)  # the file model's quick run, once a GPU is free
  setup; copy_tree qf
  background "study qf --cores 6 --config preset=quick run=qf \"$ENCODER\""
  sleep 20; wait_all ;;
compare)  # the built-in run against the Llama run, in qa's copy
  wait_all
  cp -a $W/ql/results/ql $W/qa/results/ && (cd $W/qa && python3 -m snakemake --cores 4 \
    report/compare/qa_vs_ql/index.html --config preset=quick run=qa > $W/compare.out 2>&1; \
    echo "compare rc $?"; tail -3 $W/compare.out) ;;
jobs)  # the final code: fork guard, then one job of each measuring rule of the quick preset, at once
  setup
  python3 tools/check_fork_guard.py 2>&1 | tail -2 | tee $W/fork_guard.txt
  copy_tree qc
  R=results/qc
  (cd $W/qc && timeout 290 python3 -m snakemake --cores 8 --resources gpu=1 --keep-going \
    $R/timing/raw/small_ctx256_fp32_naive.csv $R/compile/raw/small_ctx256_bf16_naive.csv \
    $R/ladder/raw/small_ctx256_bf16-sdpa.csv $R/attention/raw/naive_fp32_d64.csv \
    $R/memory/raw/small_ctx256_train_step_bf16.json $R/nsys/runs.csv $R/precision/accumulation.csv \
    $R/precision/norm_errors_small.csv --config preset=quick run=qc > $W/qc.log 2>&1; echo $? > $W/qc.rc)
  echo "qc rc $(cat $W/qc.rc): $(grep -c '^Finished jobid' $W/qc.log) jobs done"; grep -E "^Error in rule" $W/qc.log
  tail -2 $W/qc.log
  cd $W && tar --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.pickle' -czf $OUT/qc.tgz qc/results \
    qc/logs qc.log fork_guard.txt gpu.txt 2>/dev/null ;;
wait) wait_all ;;
collect)
  wait_all
  cd $W && tar --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.pickle' --exclude='*.pickle.gz' \
    --exclude='*.qdstrm' -czf $OUT/runs.tgz */results */report */logs 2>/dev/null
  tar -czf $OUT/benches.tgz *.txt *.csv *.log *.rc 2>/dev/null; ls -la $OUT ;;
*) echo "usage: $0 m1|m2|wait|collect" >&2; exit 2 ;;
esac
