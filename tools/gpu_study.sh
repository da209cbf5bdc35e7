#!/usr/bin/env bash
# The study's cost on a GPU, across device calls (../shared/gpu/README.md,
# "Long runs"); run from the repository root.
#   call 1:  COMMIT=<hash> tools/gpu_study.sh start     carry .whl and .gpu-libs: a
#            job's start with and without the job server, the quick preset from a
#            clean copy (timed), then in the background the ladder benchmark and the
#            full study, most needed jobs first
#   call 2+: tools/gpu_study.sh wait      carry nothing; waits up to WAIT_S seconds
#   last:    tools/gpu_study.sh collect   results (no reports, exports, snapshots) to $OUT
set -uo pipefail
W=/tmp/study
WAIT_S=${WAIT_S:-540}
started=$(date +%s)

wait_for_full() {
  while [ ! -f $W/full.rc ] && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do sleep 5; done
  [ -f $W/ladder_2.7B.log ] && tail -8 $W/ladder_2.7B.log
  [ -f $W/ladder_small.log ] && tail -6 $W/ladder_small.log
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
  export LMSTUDY_COMMIT=${COMMIT:-unknown}
  # One timing job's own process (before) against forks of the job server (after):
  # the first of those starts the server, the others find it.
  for mode in 0 0 1 1 1; do
    i=$((${i:-0} + 1)); t0=$(date +%s%N)
    (cd $W/full && LMSTUDY_JOB_SERVER=$mode python3 scripts/gpu_lease.py -- python3 scripts/time_model.py \
      --out $W/start_$i.csv --phases $W/start_${i}_server$mode.json --size small --d-model 768 --d-ff 3072 \
      --num-layers 12 --num-heads 12 --context-length 128 --precision fp32 > $W/start_$i.log 2>&1)
    echo "job start, server=$mode: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall, phases $(cat $W/start_${i}_server$mode.json | tr -d '\n ' | cut -c1-200)" | tee -a $W/job_start.txt
  done
  t0=$(date +%s%N)
  (cd $W/quick && python3 -m snakemake --cores 1 --resources gpu=1 --config preset=quick run=quick \
    > $W/quick.log 2>&1); rc=$?
  echo "quick preset: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms wall" | tee $W/quick_wall.txt
  tail -3 $W/quick.log
  # The full study, most needed jobs first: the timing jobs of 2.7B and small,
  # then every other 2.7B job, then attention, then the rest.
  (cd $W/full && python3 tools/study_targets.py > $W/targets.txt)
  cd $W/full && setsid bash -c '
    full() {  # one group of targets (none: everything), its own log
      python3 -m snakemake $2 --cores 1 --resources gpu=1 --keep-going --config run=full > '$W'/full_$1.log 2>&1
    }
    full 1 "$(sed -n 1p '$W'/targets.txt)"
    python3 scripts/bench_ladder.py --out '$W'/ladder_2.7B.csv --d-model 2560 --d-ff 10240 --num-layers 32 \
      --num-heads 32 --context-length 1024 --profile-steps 3 \
      --rungs bf16-sdpa-compile bf16-sdpa-cudagraphs-compiled-adamw bf16-sdpa-cudagraphs-master \
      > '$W'/ladder_2.7B.log 2>&1
    full 2 "$(sed -n 2p '$W'/targets.txt)"
    python3 scripts/bench_ladder.py --out '$W'/ladder_small.csv --d-model 768 --d-ff 3072 --num-layers 12 \
      --num-heads 12 --context-length 1024 --check-loss 50 --sustained-repeats 100 \
      --rungs bf16-sdpa-master bf16-sdpa-cudagraphs-master > '$W'/ladder_small.log 2>&1
    full 3 "$(sed -n 3p '$W'/targets.txt)"
    full 9 ""
    echo $? > '$W'/full.rc' < /dev/null > /dev/null 2>&1 &
  wait_for_full
  ;;
ladder)
  # The quick preset from a clean copy (timed), then in the background the ladder
  # section of the full study for 2.7B (every default rung) and the hand-run
  # benchmark of three of its rungs, for the pipeline-vs-script comparison.
  mkdir -p $W
  source tools/gpu_env.sh
  export LMSTUDY_COMMIT=${COMMIT:-unknown}
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee $W/gpu.txt
  for copy in quick full; do
    mkdir -p $W/$copy && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$copy
  done
  t0=$(date +%s%N)
  (cd $W/quick && python3 -m snakemake --cores 1 --resources gpu=1 --config preset=quick run=quick \
    > $W/quick.log 2>&1); rc=$?
  echo "quick preset: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms wall" | tee $W/quick_wall.txt
  tail -3 $W/quick.log
  # The profile jobs' declared profile/ folders: the .nsys-rep and .sqlite nsys wrote.
  ls -l $W/quick/results/quick/nsys/raw/*/profile/ | tee -a $W/quick_wall.txt
  cd $W/full && setsid bash -c '
    printf "run: full\nladder: {sizes: [2.7B]}\n" > '$W'/ladder_2.7B.yaml
    python3 -m snakemake results/full/ladder/ladder.csv --cores 1 --resources gpu=1 --keep-going \
      --configfile '$W'/ladder_2.7B.yaml > '$W'/full_1.log 2>&1
    python3 scripts/bench_ladder.py --out '$W'/ladder_2.7B.csv --d-model 2560 --d-ff 10240 --num-layers 32 \
      --num-heads 32 --context-length 1024 --profile-steps 3 \
      --rungs bf16-sdpa bf16-sdpa-compile bf16-sdpa-cudagraphs-master > '$W'/ladder_2.7B.log 2>&1
    echo $? > '$W'/full.rc' < /dev/null > /dev/null 2>&1 &
  wait_for_full
  ;;
wait)
  wait_for_full
  ;;
collect)
  wait_for_full
  source tools/gpu_env.sh > /dev/null 2>&1
  cd $W/full && python3 scripts/study_cost.py --out $W/full_cost.csv \
    --benchmarks $(find results/full/benchmarks -name '*.tsv') \
    --phases $(find results/full/benchmarks -name '*.phases.json')
  tar -czf "$OUT/full.tar.gz" -C $W/full --exclude='*.nsys-rep' --exclude='*.sqlite' \
    --exclude='*.pickle' --exclude='*.json.gz' results logs
  tar -czf "$OUT/quick.tar.gz" -C $W/quick --exclude='*.nsys-rep' --exclude='*.sqlite' \
    --exclude='*.pickle' --exclude='*.json.gz' results logs report
  cp $W/full_cost.csv "$OUT/"
  tar -czf "$OUT/ladder.tar.gz" -C $W --ignore-failed-read ladder_2.7B.csv ladder_2.7B.json ladder_2.7B.log \
    ladder_small.csv ladder_small.json ladder_small.losses.csv ladder_small.log job_start.txt \
    $(cd $W && ls start_*.json)
  cat $W/*.txt $W/*.log > "$OUT/logs.txt" 2>/dev/null
  ;;
*)
  echo "usage: $0 start|wait|collect" >&2; exit 2
  ;;
esac
