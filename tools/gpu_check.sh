#!/usr/bin/env bash
# Every open issue's GPU check from one script, on one 4-GPU node, across device calls
# (../shared/gpu/README.md, "Long runs"); run from the repository root, carrying .whl and
# .gpu-libs on the first call. Every call ends by copying what it has into $OUT: the node may
# be gone at the next one.
#   call 1: tools/gpu_check.sh quick   the distributed sections first, alone on the node (their
#           link bandwidth needs it to themselves); then, in the background and side by side
#           through the machine-wide lease, six quick studies: qa and qa2 (the built-in model
#           twice: A/A), ql (a Hugging Face Llama), qe (a model from a file), b9 and b10 (the
#           timing section at batch 9 and 10: A/B)
#   call 2: tools/gpu_check.sh compare waits for them; the comparisons qa_vs_qa2, b9_vs_b10,
#           qa_vs_ql, qa_vs_qe and their verdict counts per measure
#   call 3: tools/gpu_check.sh full    the full preset in one command on the 4 GPUs, in the
#           background
#   call 4: tools/gpu_check.sh wait    waits for it, then collects its tables and report
# Across code versions, on a node of 2 or more GPUs (a refactor that must not change what is measured):
#   call 1: tools/gpu_check.sh versions  qold (the code of $OLD_TREE, an exported older commit,
#           carried) and qnew (this checkout), the built-in quick preset side by side, and ql (a
#           Hugging Face Llama, this checkout), in the background through the lease
#   call 2: tools/gpu_check.sh versions-compare  waits for them; the comparisons qnew_vs_qold
#           (the same model, two versions of the code: an A/A if the measurement is unchanged) and
#           qnew_vs_ql, their verdict counts per measure, and each run's cost totals
set -uo pipefail
W=/tmp/w
WAIT_S=${WAIT_S:-530}
started=$(date +%s)
LLAMA="model={factory: 'lmstudy.measure.hf_factory:llama', name: llama}"
ENCODER="model={factory: 'tests/fixtures/models/encoder_lm.py:build', name: encoder-lm}"
EXCLUDE=(--exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.pickle' --exclude='*.pickle.gz'
  --exclude='*.qdstrm')

copy_tree() { mkdir -p $W/$1 && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$1; }

study() {  # copy name, then snakemake's arguments (a quick study: one GPU job at a time)
  local name=$1; shift
  # Each copy's own lmstudy (an older version's in its own folder), not the one the env names.
  (cd $W/$name && export PYTHONPATH=/tmp/site:$W/$name && s=$(date +%s) && python3 -m snakemake --cores 4 --resources gpu=1 --keep-going "$@" \
     > $W/$name.log 2>&1; echo $? > $W/$name.rc; echo $(( $(date +%s) - s )) > $W/$name.wall)
}

wait_for() {  # the logs to wait for (their .rc files)
  while [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do
    pending=0; for n in "$@"; do [ -f $W/$n.rc ] || pending=1; done
    [ $pending = 0 ] && break; sleep 5
  done
  for n in "$@"; do
    echo "== $n: $(grep -c '^Finished jobid' $W/$n.log 2>/dev/null) jobs done, rc $(cat $W/$n.rc 2>/dev/null || echo running), wall $(cat $W/$n.wall 2>/dev/null) s"
    grep -E "^Error in rule|error:" $W/$n.log 2>/dev/null | head -3
  done
}

setup() {
  mkdir -p $W; source tools/gpu_env.sh
  export LMSTUDY_COMMIT=${LMSTUDY_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv | tee $W/gpu.txt
  nvidia-smi topo -m > $W/topo.txt 2>&1
}

background() { export -f study; export W; setsid bash -c "$1" < /dev/null > /dev/null 2>&1 & }

cost_totals() {  # each run's cost section: job-seconds by rule and phase, GPU-minutes, the summary
  python3 tools/gpu_summary.py $(for n in "$@"; do echo $W/$n; done)
}

collect() {  # tables, records and logs (no exports, snapshots) into $OUT, at most 8 files
  (cd $W && tar "${EXCLUDE[@]}" -czf $OUT/runs.tgz */results */report */logs 2>/dev/null)
  (cd $W && tar -czf $OUT/logs.tgz *.txt *.log *.rc *.wall 2>/dev/null)
  ls -la $OUT
}

case "${1:-}" in
quick)
  setup
  if [ -x tools/gpu_check_42.sh ]; then
    copy_tree qd && (cd $W/qd && timeout 300 bash tools/gpu_check_42.sh > $W/distributed.txt 2>&1; echo $? > $W/qd.rc)
    tail -25 $W/distributed.txt
  fi
  # Issue 37: one timing job of a Llama that writes down each process importing transformers
  # (tests/fixtures/models/llama_recording.py), alone; issue 40: a wrong spec refused before the GPU.
  spec=$(python3 -m lmstudy spec timing size=small context_length=128 precision=fp32 variant=naive \
    --preset quick --spec '{"model": {"factory": "tests/fixtures/models/llama_recording.py:build",
    "name": "llama"}}')
  LMSTUDY_TEST_PID_FILE=$W/pids python3 -m lmstudy measure timing --spec "$spec" \
    --out $W/imports_rows.csv --phases $W/imports_phases.json > $W/imports.log 2>&1
  echo "llama imports job: exit $?; processes that imported transformers: $(grep -c '^transformers' $W/pids)" \
    | tee $W/imports.txt
  bad=$(echo "$spec" | python3 -c 'import json,sys; s=json.load(sys.stdin); s["timed_steps"]=-3; print(json.dumps(s))')
  python3 -m lmstudy measure timing --spec "$bad" --out $W/bad.csv > $W/bad.log 2>&1
  echo "a spec with timed_steps -3: exit $? (want 2), rows written: $(test -e $W/bad.csv && echo yes || echo no)" \
    | tee -a $W/imports.txt; tail -1 $W/bad.log | tee -a $W/imports.txt
  # The quick studies take one GPU job at a time each, so without the distributed sections (their
  # jobs take several GPUs at once, and were measured above with the node to themselves).
  printf 'comm: {enabled: false}\nddp: {enabled: false}\nsharding: {enabled: false}\n' > $W/one_gpu.yaml
  for r in qa qa2 ql qe b9 b10; do copy_tree $r; done
  O="--configfile $W/one_gpu.yaml --config preset=quick"
  background "study qa $O run=qa & study qa2 $O run=qa2 & study ql $O run=ql \"$LLAMA\" & \
    study qe $O run=qe \"$ENCODER\" & study b9 results/b9/timing/timing.csv $O run=b9 batch_size=9 & \
    study b10 results/b10/timing/timing.csv $O run=b10 batch_size=10 & wait"
  sleep 30; wait_for qa qa2 ql qe b9 b10; collect ;;
compare)
  source tools/gpu_env.sh > /dev/null 2>&1  # a later call: the wheels installed by the first stay in /tmp/site
  wait_for qa qa2 ql qe b9 b10
  for other in qa2 ql qe; do cp -a $W/$other/results/$other $W/qa/results/; done
  cp -a $W/b10/results/b10 $W/b9/results/
  for pair in qa:qa2 qa:ql qa:qe; do
    b=${pair#*:}
    (cd $W/qa && python3 -m snakemake --cores 8 report/compare/qa_vs_$b/index.html --configfile $W/one_gpu.yaml --config preset=quick run=qa \
      > $W/compare_$b.log 2>&1; echo "compare qa_vs_$b rc $?")
  done
  (cd $W/b9 && python3 -m snakemake --cores 8 report/compare/b9_vs_b10/index.html --configfile $W/one_gpu.yaml --config preset=quick run=b9 \
    batch_size=9 > $W/compare_b10.log 2>&1; echo "compare b9_vs_b10 rc $?")
  python3 tools/verdict_counts.py $W/qa/report/compare/qa_vs_qa2 $W/b9/report/compare/b9_vs_b10 \
    | tee $W/verdicts.txt
  cost_totals qa qa2 ql qe | tee $W/cost_totals.txt
  collect ;;
full)
  setup; copy_tree full
  background "study full --cores 16 --resources gpu=4 --config run=full"
  sleep 30; wait_for full; collect ;;
versions)
  setup
  mkdir -p $W/qold && cp -r "${OLD_TREE:-old773}/." $W/qold/
  for r in qnew ql; do copy_tree $r; done
  printf 'comm: {enabled: false}\nddp: {enabled: false}\nsharding: {enabled: false}\n' > $W/one_gpu.yaml
  O="--configfile $W/one_gpu.yaml --config preset=quick"
  background "LMSTUDY_COMMIT=${OLD_COMMIT:-773fc79} study qold $O run=qold & study qnew $O run=qnew & \
    study ql $O run=ql \"$LLAMA\" & wait"
  sleep 30; wait_for qold qnew ql; collect ;;
versions-compare)
  source tools/gpu_env.sh > /dev/null 2>&1
  wait_for qold qnew ql
  for other in qold ql; do cp -a $W/$other/results/$other $W/qnew/results/; done
  for b in qold ql; do
    (cd $W/qnew && PYTHONPATH=/tmp/site:$W/qnew python3 -m snakemake --cores 8 report/compare/qnew_vs_$b/index.html \
      --configfile $W/one_gpu.yaml --config preset=quick run=qnew > $W/compare_$b.log 2>&1; echo "compare qnew_vs_$b rc $?")
  done
  python3 tools/verdict_counts.py $W/qnew/report/compare/qnew_vs_qold $W/qnew/report/compare/qnew_vs_ql \
    | tee $W/verdicts.txt
  cost_totals qold qnew ql | tee $W/cost_totals.txt
  collect ;;
wait)
  source tools/gpu_env.sh > /dev/null 2>&1
  wait_for full
  [ -f $W/full.rc ] && cost_totals full | tee $W/cost_totals_full.txt
  collect ;;
*) echo "usage: $0 quick|compare|full|wait|versions|versions-compare" >&2; exit 2 ;;
esac
