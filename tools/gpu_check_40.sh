#!/usr/bin/env bash
# Issue 40's GPU check (one node, one GPU is enough): a measuring job still takes the spec the workflow
# builds for a GPU preset, refuses a wrong one before touching the GPU, and the job server leaves with
# the run. Results under $OUT (default ./gpu_check_40).
set -u
OUT=${OUT:-gpu_check_40}
mkdir -p "$OUT"
PY=${PY:-.venv/bin/python}

# 1. The quick preset's timing spec, built by `lmstudy spec`, measured on the GPU: exit 0, rows "ok".
SPEC=$($PY -m lmstudy spec timing size=small context_length=128 precision=bf16 variant=naive \
       --preset quick 2>"$OUT/spec.err")
echo "$SPEC" > "$OUT/spec.json"
$PY -m lmstudy measure timing --spec "$SPEC" --out "$OUT/timing.csv" >"$OUT/measure.log" 2>&1
echo "measure rc=$?" | tee "$OUT/rc.txt"

# 2. The same spec with timed_steps -3: refused in one line, exit 2, no CSV, no CUDA context made.
BAD=$(echo "$SPEC" | $PY -c 'import json,sys; s=json.load(sys.stdin); s["timed_steps"]=-3; print(json.dumps(s))')
$PY -m lmstudy measure timing --spec "$BAD" --out "$OUT/bad.csv" >"$OUT/bad.log" 2>&1
echo "bad rc=$? (want 2); csv exists: $(test -e "$OUT/bad.csv" && echo yes || echo no) (want no)" \
  | tee -a "$OUT/rc.txt"

# 3. A dry run of the quick preset: every spec the workflow builds passes the spec check (no error).
.venv/bin/snakemake -n --cores 1 --resources gpu=1 --config preset=quick >"$OUT/dry_run.log" 2>&1
echo "dry run rc=$? (want 0)" | tee -a "$OUT/rc.txt"
