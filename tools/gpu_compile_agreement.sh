#!/usr/bin/env bash
# How closely two compilations of one model agree (compare.compiled_agreement): the quick preset's
# CUDA-graph ladder rung and the compile section's small bf16 training step, each measured again and
# again by `lmstudy measure` on every GPU of the node, each job compiling from scratch (its own
# inductor cache, lmstudy.cli.compile_from_scratch), for RUN_S seconds. Run from the repository
# root, carrying .whl and .gpu-libs; rows and a summary into $OUT.
set -uo pipefail
W=/tmp/agree; RUN_S=${RUN_S:-400}; mkdir -p $W
source tools/gpu_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $W/gpu.txt
ladder=$(python3 -m lmstudy spec ladder size=small context_length=256 rung=bf16-sdpa-cudagraphs-master --preset quick)
compile=$(python3 -m lmstudy spec compile size=small context_length=256 precision=bf16 attention=naive --preset quick)
stream() {  # one GPU's loop
  local gpu=$1 i=0 start=$(date +%s)
  while [ $(( $(date +%s) - start )) -lt "$RUN_S" ]; do
    i=$((i + 1))
    CUDA_VISIBLE_DEVICES=$gpu python3 -m lmstudy measure ladder --spec "$ladder" --out $W/ladder_g${gpu}_$i.csv \
      --matmul-out $W/matmul_g${gpu}_$i.csv >> $W/log_g$gpu.txt 2>&1
    CUDA_VISIBLE_DEVICES=$gpu python3 -m lmstudy measure compile --spec "$compile" --out $W/compile_g${gpu}_$i.csv \
      >> $W/log_g$gpu.txt 2>&1
  done
}
for g in $(nvidia-smi --query-gpu=index --format=csv,noheader); do stream $g & done
wait
python3 - <<'PY' | tee $W/summary.txt
import glob, pandas as pd
rows = []
for kind in ("ladder", "compile"):
    for f in sorted(glob.glob(f"/tmp/agree/{kind}_g*.csv")):
        t = pd.read_csv(f)
        t = t[t["status"] == "ok"]
        t = t[t["mode"] == "compiled"] if kind == "compile" else t
        for _, r in t.iterrows():
            label = kind if kind == "ladder" else f"compile {r['mode']}"
            rows.append((label, f.split("/")[-1], r["gpu_busy_ms"], r.get("gpu_busy_ms_processes"), r["median_ms"]))
    if kind == "compile":
        for f in sorted(glob.glob("/tmp/agree/compile_g*.csv")):
            t = pd.read_csv(f)
            for _, r in t[(t["status"] == "ok") & (t["mode"] == "eager")].iterrows():
                rows.append(("compile eager", f.split("/")[-1], r["gpu_busy_ms"], r.get("gpu_busy_ms_processes"), r["median_ms"]))
df = pd.DataFrame(rows, columns=["cell", "job", "gpu_ms", "processes", "median_ms"])
print(df.to_string())
for cell, g in df.groupby("cell"):
    print(f"{cell}: {len(g)} compilations, GPU ms {g.gpu_ms.min():.3f}-{g.gpu_ms.max():.3f} "
          f"(max/min {g.gpu_ms.max() / g.gpu_ms.min():.4f}), median {g.gpu_ms.median():.3f}")
df.to_csv("/tmp/agree/agreement.csv", index=False)
PY
cp $W/summary.txt $W/agreement.csv $OUT/ 2>/dev/null
tar -czf $OUT/agree.tgz -C $W . 2>/dev/null; ls -la $OUT
