#!/usr/bin/env bash
# Section 4 on a GPU: 2.7B snapshots at ctx 128/256/512, forward and training
# step, fp32 and bf16, each analysed; plus a small snapshot of the job script
# as a fixture. usage: tools/gpu_memory_check.sh OUTDIR
set -uo pipefail
O=${1:?usage: gpu_memory_check.sh OUTDIR}; R=$O/memory; mkdir -p $R/raw $O/fixture
for c in 128 256 512; do for p in forward train_step; do for x in fp32 bf16; do n=2.7B_ctx${c}_${p}_$x
python3 -m lmstudy measure memory --out $R/raw/$n.pickle --meta $R/raw/$n.json --spec "$(python3 -m lmstudy spec memory size=2.7B context_length=$c pass_name=$p precision=$x)" > $R/$n.log 2>&1 || echo "FAIL $n"
python3 -m lmstudy memory_summary --top 10 $R/raw/$n.pickle --out $R/summary/$n >> $R/$n.log 2>&1 || echo "FAIL summary $n"
tail -2 $R/$n.log; done; done; done
python3 -m lmstudy memory_table --out $R/memory.csv --sizes 2.7B --context-lengths 128 256 512 --passes forward train_step --precisions fp32 bf16 --summaries $R/summary/*/summary.json
python3 -m lmstudy measure memory --out $O/fixture/snapshot_job_train_step_bf16.pickle --spec "$(python3 -m lmstudy spec memory size=fixture d_model=256 d_ff=1024 num_layers=2 num_heads=4 context_length=128 batch_size=2 vocab_size=1000 pass_name=train_step precision=bf16 warmup_steps=1)"
python3 -c "import pandas as pd;pd.set_option('display.width',250);f=pd.read_csv('$R/memory.csv');print(f[['context_length','pass','precision','status','stage','peak_bytes','max_memory_allocated','peak_vs_allocator','peak_phase']].to_string())"
for x in fp32 bf16; do head -4 $R/summary/2.7B_ctx512_train_step_$x/largest_allocations.csv; done
du -sh $R/raw/*.pickle; rm -f $R/raw/*.pickle
