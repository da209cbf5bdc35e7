#!/usr/bin/env bash
# The study on a node of several GPUs, across device calls (../shared/gpu/README.md,
# "Long runs"); run from the repository root.
#   call 1:  tools/gpu_multi.sh start    carry .whl and .gpu-libs: the process-start
#            benchmark; the quick preset from clean copies with one GPU job at a time
#            (q1), then with one per GPU (qall); then, in the background and at once:
#            the full study on every GPU, two runs taking turns on GPU 0 beside a
#            process not of the study (pair_a, pair_b), and the quick preset with TF32
#            on (qtf32)
#   call 2+: tools/gpu_multi.sh wait     carry nothing; waits up to WAIT_S seconds
#   last:    tools/gpu_multi.sh collect  results to $OUT
set -uo pipefail
W=/tmp/multi
WAIT_S=${WAIT_S:-540}
started=$(date +%s)
SMK="python3 -m snakemake"

wait_for_background() {
  while [ ! -f $W/background.rc ] && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do sleep 5; done
  for log in $W/full.log $W/pair_a.log $W/pair_b.log $W/qtf32.log; do
    [ -f "$log" ] && echo "== $(basename "$log"): $(grep -c '^Finished jobid' "$log") jobs done; $(tail -1 "$log")"
  done
  [ -f $W/background.rc ] && echo "background ended: $(cat $W/background.rc)"
}

timed() {  # name, then the command: its wall time to $W/<name>_wall.txt
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  "$@" > $W/$name.log 2>&1; local rc=$?
  echo "$name: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms wall" | tee $W/${name}_wall.txt
  tail -2 $W/$name.log
}

case "${1:-}" in
start)
  mkdir -p $W
  source tools/gpu_env.sh
  export LMSTUDY_GPU_LEASE_DIR=$W/leases
  nvidia-smi > $W/nvidia-smi.txt 2>&1; head -25 $W/nvidia-smi.txt
  nvidia-smi --query-gpu=index,uuid --format=csv,noheader,nounits > $W/query_gpu.txt
  GPUS=$(wc -l < $W/query_gpu.txt); echo "$GPUS GPUs, $(nproc) cores"
  for copy in q1 qall full pair; do
    mkdir -p $W/$copy && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$copy
  done
  (cd $W/full && python3 scripts/bench_process_start.py --out $W/process_start.csv \
    --sizes small 2.7B --repeats 3 > $W/process_start.log 2>&1); tail -6 $W/process_start.log
  cd $W/q1 && timed q1 $SMK --cores "$(nproc)" --resources gpu=1 --config preset=quick run=q1
  cd $W/qall && timed qall $SMK --cores "$(nproc)" --resources gpu="$GPUS" --config preset=quick run=qall
  cd $W/full && setsid bash -c '
    '"$SMK"' --cores '"$(nproc)"' --resources gpu='"$GPUS"' --keep-going --config run=full \
      > '$W'/full.log 2>&1 &
    # A process not of the study on GPU 0, then two runs that take turns there.
    uuid0=$(head -1 '$W'/query_gpu.txt | cut -d, -f2 | tr -d " ")
    CUDA_VISIBLE_DEVICES=$uuid0 python3 -c "import torch, time; x = torch.empty(2**28, device=\"cuda\"); time.sleep(150)" &
    foreign=$!
    sleep 20
    nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits \
      > '$W'/compute_apps.txt 2>&1
    cd '$W'/pair
    for run in pair_a pair_b; do
      LMSTUDY_GPUS=0 '"$SMK"' results/$run/timing/raw/small_ctx128_fp32_naive.csv \
        results/$run/timing/raw/small_ctx128_bf16_naive.csv results/$run/timing/raw/small_ctx256_fp32_naive.csv \
        --cores 4 --resources gpu=1 --config preset=quick run=$run > '$W'/$run.log 2>&1 &
    done
    wait $(jobs -p | tail -2)
    kill $foreign
    cd '$W'/qall && '"$SMK"' --cores 8 --resources gpu='"$GPUS"' --config preset=quick run=qtf32 tf32=true \
      > '$W'/qtf32.log 2>&1
    wait
    echo done > '$W'/background.rc' < /dev/null > /dev/null 2>&1 &
  cd - > /dev/null
  wait_for_background
  ;;
wait)
  wait_for_background
  ;;
collect)
  wait_for_background
  source tools/gpu_env.sh > /dev/null 2>&1
  cd $W/full && python3 -m lmstudy study_cost --out $W/full_cost.csv \
    --benchmarks $(find results/full/benchmarks -name '*.tsv') \
    --phases $(find results/full/benchmarks -name '*.phases.json') | tail -1
  ex=(--exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.pickle' --exclude='*.json.gz' --exclude='*.qdstrm')
  tar -czf "$OUT/full.tar.gz" -C $W/full "${ex[@]}" results logs
  tar -czf "$OUT/quick.tar.gz" -C $W "${ex[@]}" q1/results q1/logs q1/report qall/results qall/logs \
    qall/report pair/results pair/logs
  cp $W/process_start.csv $W/full_cost.csv "$OUT/"
  tar -czf "$OUT/smi.tar.gz" -C $W query_gpu.txt compute_apps.txt nvidia-smi.txt
  cat $W/*.txt $W/*.log > "$OUT/logs.txt" 2>/dev/null
  ls -la "$OUT"
  ;;
*)
  echo "usage: $0 start|wait|collect" >&2; exit 2
  ;;
esac
