#!/usr/bin/env bash
# The whole study on one-GPU machines, across device calls (../shared/gpu/README.md,
# "Long runs"); run from the repository root. A machine goes back after 30
# minutes, so the full study runs in two parts, one per machine, and the cost section's
# accounting (python -m lmstudy study_cost) adds up the two parts' job records.
#   machine 1, call 1:  COMMIT=<hash> tools/gpu_study.sh part1   carry .whl and .gpu-libs:
#            the real-GPU fixture of section 2, the quick preset from a clean copy
#            (timed), then in the background part 1 of the full study: timing,
#            Nsight Systems, memory, mixed precision
#   machine 2, call 1:  COMMIT=<hash> tools/gpu_study.sh part2   carry .whl and .gpu-libs:
#            in the background part 2: attention, torch.compile, the ladder (2.7B,
#            then small)
#   calls 2+: tools/gpu_study.sh wait      carry nothing; waits up to WAIT_S seconds
#   last:     tools/gpu_study.sh collect   records and tables (no reports, exports,
#             snapshots) to $OUT
set -uo pipefail
W=/tmp/study
WAIT_S=${WAIT_S:-540}
started=$(date +%s)
GPU_JOBS_OF_PART2="attention_sweep compile_model ladder_rung"
GPU_JOBS_OF_PART1="time_model nsys_backend profile_model memory_snapshot precision_experiments"

wait_for_full() {
  while [ ! -f $W/full.rc ] && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do sleep 5; done
  echo "== full study: $(grep -c '^Finished jobid' $W/full_*.log 2>/dev/null | paste -sd' ') jobs done"
  tail -3 "$(ls -t $W/full_*.log | head -1)"
  [ -f $W/full.rc ] && echo "full study part ended: $(cat $W/full.rc)"
}

copy_tree() {  # the checkout, without the carried folders, into $W/$1
  mkdir -p $W/$1 && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$1
}

full() {  # log name, then snakemake's arguments
  local name=$1; shift
  (cd $W/full && python3 -m snakemake "$@" --cores 1 --resources gpu=1 --keep-going --config run=full \
    > $W/full_$name.log 2>&1)
}

case "${1:-}" in
part1)
  mkdir -p $W
  source tools/gpu_env.sh
  export LMSTUDY_COMMIT=${COMMIT:-unknown}
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee $W/gpu.txt
  copy_tree quick; copy_tree full
  NSYS=nsys bash tools/gpu_fixtures.sh $W/fixtures passes > $W/fixtures.log 2>&1; tail -4 $W/fixtures.log
  t0=$(date +%s%N)
  (cd $W/quick && python3 -m snakemake --cores 1 --resources gpu=1 --config preset=quick run=quick \
    > $W/quick.log 2>&1); rc=$?
  echo "quick preset: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms wall" | tee $W/quick_wall.txt
  tail -3 $W/quick.log
  ls -l $W/quick/results/quick/nsys/raw/*/profile/ | tee -a $W/quick_wall.txt
  export -f full; export W
  setsid bash -c "full 1 --omit-from $GPU_JOBS_OF_PART2; echo \$? > $W/full.rc" < /dev/null > /dev/null 2>&1 &
  wait_for_full
  ;;
part2)
  mkdir -p $W
  source tools/gpu_env.sh
  export LMSTUDY_COMMIT=${COMMIT:-unknown}
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee $W/gpu.txt
  copy_tree full
  export -f full; export W
  # The 2.7B rungs first: if the machine goes back early, what is left is small's.
  rungs_2_7B=$(cd $W/full && python3 -c "
import yaml; c = yaml.safe_load(open('config.yaml'))['ladder']
print(' '.join(f'results/full/ladder/raw/2.7B_ctx{c[\"context_length\"]}_{r}.csv' for r in c['rungs']))")
  setsid bash -c "full 2 results/full/attention/attention.csv results/full/compile/compile.csv $rungs_2_7B
    full 3 --omit-from $GPU_JOBS_OF_PART1; echo \$? > $W/full.rc" < /dev/null > /dev/null 2>&1 &
  wait_for_full
  ;;
wait)
  wait_for_full
  ;;
collect)
  wait_for_full
  source tools/gpu_env.sh > /dev/null 2>&1
  cd $W/full && python3 -m lmstudy study_cost --out $W/full_cost.csv \
    --benchmarks $(find results/full/benchmarks -name '*.tsv') \
    --phases $(find results/full/benchmarks -name '*.phases.json')
  tar -czf "$OUT/full.tar.gz" -C $W/full --exclude='*.nsys-rep' --exclude='*.sqlite' \
    --exclude='*.pickle' --exclude='*.json.gz' results logs
  cp $W/full_cost.csv "$OUT/"
  if [ -d $W/quick ]; then
    tar -czf "$OUT/quick.tar.gz" -C $W/quick --exclude='*.nsys-rep' --exclude='*.sqlite' \
      --exclude='*.pickle' --exclude='*.json.gz' results logs report
  fi
  [ -d $W/fixtures ] && tar -czf "$OUT/fixtures.tar.gz" -C $W fixtures
  cat $W/*.txt $W/*.log > "$OUT/logs.txt" 2>/dev/null
  ;;
*)
  echo "usage: $0 part1|part2|wait|collect" >&2; exit 2
  ;;
esac
