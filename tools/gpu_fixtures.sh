#!/usr/bin/env bash
# Capture the GPU fixtures of tests/fixtures on a CUDA node (see
# ../shared/gpu/README.md for the install lines run before this).
#   usage: tools/gpu_fixtures.sh OUTDIR
set -uo pipefail
out=${1:?usage: gpu_fixtures.sh OUTDIR}
mkdir -p "$out"
nsys=${NSYS:-nsys}
"$nsys" --version > "$out/nsys_version.txt"
cap() {  # name pass precision attention
  "$nsys" profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
    --force-overwrite=true -o "$out/$1" \
    python3 tools/capture_gpu_fixtures.py nsys --pass "$2" --precision "$3" --attention "$4"
  "$nsys" export --type sqlite --force-overwrite=true -o "$out/$1.sqlite" "$out/$1.nsys-rep"
  "$nsys" stats -r nvtx_kern_sum,cuda_gpu_kern_sum --format csv --force-export=false \
    -o "$out/$1" "$out/$1.sqlite" > /dev/null
}
cap nsys_train_fp32 train_step fp32 naive
cap nsys_forward_fp32 forward fp32 naive
cap nsys_train_bf16 train_step bf16 naive
cap nsys_train_bf16_sdpa train_step bf16 sdpa
python3 tools/capture_gpu_fixtures.py snapshot --out "$out"
ls -la "$out"
