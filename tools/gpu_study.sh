#!/usr/bin/env bash
# The study's cost on a GPU, across device calls (../shared/gpu/README.md,
# "Long runs"); run from the repository root.
#   call 1:  tools/gpu_study.sh start     carry .whl and .gpu-libs: the process-start
#            benchmark, the quick preset from a clean copy (timed), then the full
#            study in the background, most needed jobs first
#   call 2+: tools/gpu_study.sh wait      carry nothing; waits up to WAIT_S seconds
#   last:    tools/gpu_study.sh collect   results (no reports, exports, snapshots) to $OUT
set -uo pipefail
W=/tmp/study
WAIT_S=${WAIT_S:-540}
started=$(date +%s)

wait_for_full() {
  while [ ! -f $W/full.rc ] && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do sleep 5; done
  echo "== full study: $(grep -c '^Finished jobid' $W/full_*.log 2>/dev/null | paste -sd' ') jobs done"
  tail -3 "$(ls -t $W/full_*.log | head -1)"
  [ -f $W/full.rc ] && echo "full study ended: $(cat $W/full.rc)"
}

case "${1:-}" in
start)
  mkdir -p $W
  source tools/gpu_env.sh
  nvidia-smi > $W/nvidia-smi.txt 2>&1; head -15 $W/nvidia-smi.txt
  for copy in quick full; do
    mkdir -p $W/$copy && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$copy
  done
  (cd $W/full && python3 scripts/bench_process_start.py --out $W/process_start.csv \
    --sizes small 2.7B --repeats 3 > $W/process_start.log 2>&1); tail -6 $W/process_start.log
  t0=$(date +%s%N)
  (cd $W/quick && python3 -m snakemake --cores 1 --resources gpu=1 --config preset=quick run=quick \
    > $W/quick.log 2>&1); rc=$?
  echo "quick preset: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms wall" | tee $W/quick_wall.txt
  tail -3 $W/quick.log
  # The full study, most needed jobs first: the timing jobs of 2.7B and small,
  # then every other 2.7B job, then attention, then the rest.
  (cd $W/full && python3 tools/study_targets.py > $W/targets.txt)
  cd $W/full && setsid bash -c '
    i=0
    while read -r targets; do
      i=$((i + 1))
      python3 -m snakemake $targets --cores 1 --resources gpu=1 --keep-going --config run=full \
        > '$W'/full_$i.log 2>&1
    done < '$W'/targets.txt
    python3 -m snakemake --cores 1 --resources gpu=1 --keep-going --config run=full \
      > '$W'/full_9.log 2>&1
    echo $? > '$W'/full.rc' < /dev/null > /dev/null 2>&1 &
  wait_for_full
  ;;
wait)
  wait_for_full
  ;;
collect)
  wait_for_full
  cd $W/full && python3 scripts/study_cost.py --out $W/full_cost.csv \
    --benchmarks $(find results/full/benchmarks -name '*.tsv') \
    --phases $(find results/full/benchmarks -name '*.phases.json')
  tar -czf "$OUT/full.tar.gz" -C $W/full --exclude='*.nsys-rep' --exclude='*.sqlite' \
    --exclude='*.pickle' --exclude='*.json.gz' results logs
  tar -czf "$OUT/quick.tar.gz" -C $W/quick --exclude='*.nsys-rep' --exclude='*.sqlite' \
    --exclude='*.pickle' --exclude='*.json.gz' results logs report
  cp $W/process_start.csv $W/full_cost.csv "$OUT/"
  cat $W/*.txt $W/*.log > "$OUT/logs.txt" 2>/dev/null
  ;;
*)
  echo "usage: $0 start|wait|collect" >&2; exit 2
  ;;
esac
