#!/usr/bin/env bash
# Issue 38's GPU check on one 4-GPU node, across device calls (../shared/gpu/README.md,
# "Long runs"); run from the repository root.
#   call 1:  tools/gpu_check_38.sh start    carry .whl and .gpu-libs: from one clean copy, at once,
#            each with --cores 4 --resources gpu=1, the jobs taking turns through the machine-wide
#            lease: the quick preset twice (runs qa and qa2: the A/A), and the timing section
#            alone at batch 9 and at batch 10 (runs qb9 and qb10: the A/B). The quick preset
#            runs at config.yaml's batch_size, 4 (presets.quick sets none), so the A/B is not
#            qa against qb10 (a 2.5x change, which any band calls) but qb9 against qb10: a
#            change of about 2-9% of GPU time, the smallest 2.1%.
#   call 2+: tools/gpu_check_38.sh wait     carry nothing; waits up to WAIT_S seconds
#   last:    tools/gpu_check_38.sh counts [A A2 B B2]   the comparisons A_vs_A2 and B_vs_B2
#            (default qa qa2 qb9 qb10) rendered on the CPU, their verdict counts per measure
#            printed (tools/verdict_counts.py) and copied with the comparisons' tables to $OUT
#
# main's tools/gpu_check.sh makes the same four runs (as qa, qa2, b9, b10); after it the counts are
#   python3 tools/verdict_counts.py $W/qa/report/compare/qa_vs_qa2 $W/b9/report/compare/b9_vs_b10
#
# What to read (timing_step_time, the A/B's rows of the small model; the 2.7B rows may be OOM at
# batch 9 and 10 on an 80 GB card, which says so):
#   A/A qa_vs_qa2: every table's "faster or slower" at most 5% of its rows on each measure, and
#     timing_step_time's GPU time "same" in at least 90% of its rows (27 of 27 expected).
#   A/B qb9_vs_qb10: timing_step_time's GPU time "slower" in every row both runs measured (18 of 18
#     small-model rows; none "same", none "undecided"); wall time mostly undecided (host-bound).
set -uo pipefail
W=/tmp/check38
WAIT_S=${WAIT_S:-540}
started=$(date +%s)
SMK="python3 -m snakemake"

wait_for_runs() {
  while [ ! -f $W/runs.rc ] && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do sleep 5; done
  for log in $W/run_*.log; do
    [ -f "$log" ] && echo "== $(basename "$log"): $(grep -c '^Finished jobid' "$log") jobs done; $(tail -1 "$log")"
  done
  cat $W/walls.txt 2>/dev/null
  [ -f $W/runs.rc ] && echo "runs ended: $(cat $W/runs.rc)"
}

case "${1:-}" in
start)
  mkdir -p $W/study
  source tools/gpu_env.sh
  export LMSTUDY_GPU_LEASE_DIR=$W/leases
  nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader > $W/query_gpu.txt; cat $W/query_gpu.txt
  tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/study
  cd $W/study && setsid bash -c '
    one() {  # run name, then its config and targets
      local run=$1; shift; local t0=$(date +%s)
      '"$SMK"' --cores 4 --resources gpu=1 --keep-going "$@" > '$W'/run_$run.log 2>&1
      echo "$run: exit $?, $(( $(date +%s) - t0 )) s" >> '$W'/walls.txt
    }
    one qa --config preset=quick run=qa &
    one qa2 --config preset=quick run=qa2 &
    one qb9 --config preset=quick run=qb9 batch_size=9 -- results/qb9/timing/timing.csv &
    one qb10 --config preset=quick run=qb10 batch_size=10 -- results/qb10/timing/timing.csv &
    wait
    echo done > '$W'/runs.rc' < /dev/null > /dev/null 2>&1 &
  cd - > /dev/null
  wait_for_runs
  ;;
wait)
  wait_for_runs
  ;;
counts)
  A=${2:-qa} A2=${3:-qa2} B=${4:-qb9} B2=${5:-qb10}
  [ -d $W/study ] && cd $W/study
  [ -f .whl/lmstudy*.whl ] 2>/dev/null && source tools/gpu_env.sh > /dev/null 2>&1
  $SMK --cores 2 --config preset=quick -- report/compare/${A}_vs_${A2}/index.html \
    report/compare/${B}_vs_${B2}/index.html > compare_38.log 2>&1 || { tail -20 compare_38.log; exit 1; }
  python3 tools/verdict_counts.py report/compare/${A}_vs_${A2} report/compare/${B}_vs_${B2} | tee counts_38.txt
  if [ -n "${OUT:-}" ]; then
    cp counts_38.txt compare_38.log "$OUT/" && cat $W/walls.txt > "$OUT/walls.txt" 2>/dev/null
    tar -czf "$OUT/compare_38.tar.gz" report/compare/${A}_vs_${A2} report/compare/${B}_vs_${B2}
    tar -czf "$OUT/results_38.tar.gz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.pickle' \
      --exclude='*.json.gz' --exclude='*.qdstrm' results/$A results/$A2 results/$B results/$B2
  fi
  ;;
*)
  echo "usage: $0 start|wait|counts [A A2 B B2]" >&2; exit 2
  ;;
esac
