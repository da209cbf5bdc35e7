#!/usr/bin/env bash
# Capture the GPU fixtures of tests/fixtures on a CUDA node (see
# ../shared/gpu/README.md for the install lines run before this).
#   usage: tools/gpu_fixtures.sh OUTDIR [passes]
# With `passes`, only the capture of both passes by the section's own program.
set -uo pipefail
out=${1:?usage: gpu_fixtures.sh OUTDIR [passes]}
mkdir -p "$out"
nsys=${NSYS:-nsys}
"$nsys" --version > "$out/nsys_version.txt"
export_and_sum() {  # name
  "$nsys" export --type sqlite --force-overwrite=true -o "$out/$1.sqlite" "$out/$1.nsys-rep"
  "$nsys" stats -r nvtx_kern_sum,cuda_gpu_kern_sum --format csv --force-export=false \
    -o "$out/$1" "$out/$1.sqlite" > /dev/null
}
cap() {  # name pass precision attention
  "$nsys" profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
    --force-overwrite=true -o "$out/$1" \
    python3 tools/capture_gpu_fixtures.py nsys --pass "$2" --precision "$3" --attention "$4"
  export_and_sum "$1"
}
# The nsys section's program (lmstudy.measure.nsys.program), the tiny model: both passes,
# warm-ups outside, in one capture split by its "profiled pass" ranges.
python3 -m lmstudy spec nsys size=tiny d_model=256 d_ff=1024 num_layers=2 num_heads=4 vocab_size=1000 \
  context_length=128 batch_size=2 precision=fp32 warmup_steps=2 profiled_steps=2 \
  "passes=[forward, train_step]" backend=nsys device=cuda > "$out/nsys_passes_fp32_spec.json"
"$nsys" profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
  --sample=none --cpuctxsw=none --force-overwrite=true -o "$out/nsys_passes_fp32" \
  python3 -m lmstudy.measure.nsys.program --spec "$out/nsys_passes_fp32_spec.json" \
  --record "$out/nsys_passes_fp32.json"
export_and_sum nsys_passes_fp32
[ "${2:-}" = passes ] && { ls -la "$out"; exit 0; }
cap nsys_train_fp32 train_step fp32 naive
cap nsys_forward_fp32 forward fp32 naive
cap nsys_train_bf16 train_step bf16 naive
cap nsys_train_bf16_sdpa train_step bf16 sdpa
python3 tools/capture_gpu_fixtures.py snapshot --out "$out"
ls -la "$out"
