#!/usr/bin/env bash
# Issue 37, deliverables 2-4, on one node of 4 GPUs; run from the repository root, carrying .whl (with a
# transformers wheel: pip install -e ".[hf]") and .gpu-libs, as tools/gpu_study.sh does.
#   call 1:  tools/gpu_check_37m.sh start     one timing job of a Llama that records its imports
#            (tests/fixtures/models/llama_recording.py), alone; then the quick preset of the built-in
#            model (run qb) and of lmstudy.measure.hf_factory:llama (run ql) at once, --cores 4
#            --resources gpu=1 each (the machine-wide lease spreads their jobs over the GPUs), in the
#            background
#   calls 2+: tools/gpu_check_37m.sh collect  waits up to WAIT_S s, then copies to $OUT: the summary
#            (summary.txt), both runs' cost tables and logs' tails
# What to read in summary.txt:
#   - "job-seconds": the sum of the measuring jobs' wall seconds of each run and ql/qb: the target is
#     at most 1.3 (before: 3x); per phase, imports, model_imports, count and build summed over jobs
#     (before: model imports booked in "imports", 25-29 s a timing job; the counting child's host build
#     booked in "build", 10 s small to 120 s 2.7B; now "count" should be a second or less a job);
#   - "processes that imported transformers in one timing job": 1 (before: 7), and that job's phases;
#   - "exit": 0 for both runs, and every report rendered (report/<run>/index.html);
#   - "left running": lines of logs naming processes ended with a job (none expected for these models).
set -uo pipefail
W=/tmp/i37
WAIT_S=${WAIT_S:-540}
started=$(date +%s)
LLAMA="model={factory: 'lmstudy.measure.hf_factory:llama', name: llama}"

run_quick() {  # run, then snakemake's extra arguments
  local run=$1; shift
  (cd $W/$run && python3 -m snakemake --cores 4 --resources gpu=1 --keep-going --config preset=quick \
    run=$run "$@" > $W/$run.log 2>&1; echo $? > $W/$run.rc)
}

case "${1:-}" in
start)
  mkdir -p $W
  source tools/gpu_env.sh
  python3 -c "import transformers" || { echo "transformers is not installed: add its wheel to .whl"; exit 1; }
  nvidia-smi --query-gpu=name,driver_version --format=csv | tee $W/gpu.txt
  # First, alone on the node: one timing job of a Llama that writes down each process that imports
  # transformers (tests/fixtures/models/llama_recording.py).
  spec=$(python3 -m lmstudy spec timing size=small context_length=128 precision=fp32 variant=naive \
    --preset quick --spec '{"model": {"factory": "tests/fixtures/models/llama_recording.py:build",
    "name": "llama"}}') || exit 1
  rm -f $W/pids
  LMSTUDY_TEST_PID_FILE=$W/pids python3 -m lmstudy measure timing --spec "$spec" \
    --out $W/imports_rows.csv --phases $W/imports_phases.json > $W/imports.log 2>&1
  echo "imports job: exit $?"; tail -2 $W/imports.log
  for run in qb ql; do
    mkdir -p $W/$run && tar --exclude=./.whl --exclude=./.gpu-libs -cf - . | tar -xf - -C $W/$run
  done
  export -f run_quick; export W
  setsid bash -c "run_quick qb" < /dev/null > /dev/null 2>&1 &
  setsid bash -c "run_quick ql \"$LLAMA\"" < /dev/null > /dev/null 2>&1 &
  ;;
collect)
  while { [ ! -f $W/qb.rc ] || [ ! -f $W/ql.rc ]; } && [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do
    sleep 5
  done
  source tools/gpu_env.sh > /dev/null 2>&1
  mkdir -p $OUT
  python3 - "$W" > $OUT/summary.txt <<'EOF'
import collections, json, sys
from pathlib import Path
import pandas as pd
W = Path(sys.argv[1])
totals = {}
for run in ("qb", "ql"):
    rc = (W / f"{run}.rc").read_text().strip() if (W / f"{run}.rc").exists() else "still running"
    root = W / run / "results" / run / "benchmarks"
    wall, phases, jobs = 0.0, collections.Counter(), 0
    for record in root.rglob("*.phases.json"):
        bench = record.with_name(record.name.replace(".phases.json", ".tsv"))
        if bench.exists():
            wall += float(pd.read_csv(bench, sep="\t")["s"].iloc[0])
        jobs += 1
        phases.update(json.loads(record.read_text())["phases"])
    totals[run] = wall
    report = (W / run / "report" / run / "index.html").exists()
    print(f"{run}: exit {rc}, report rendered: {report}, {jobs} measuring jobs, job-seconds {wall:.1f}")
    print("   phases summed over jobs (s): " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(phases.items())))
if totals.get("qb"):
    print(f"job-seconds ql/qb: {totals['ql'] / totals['qb']:.2f} (target <= 1.3)")
pids = collections.defaultdict(set)
if (W / "pids").exists():
    for line in (W / "pids").read_text().splitlines():
        event, pid = line.split()
        pids[event].add(pid)
print(f"processes that imported transformers in one timing job: {len(pids['transformers'])} "
      f"(imported the factory: {len(pids['import'])}, called it: {len(pids['call'])})")
if (W / "imports_phases.json").exists():
    print("   its phases (s):", json.loads((W / "imports_phases.json").read_text())["phases"])
if (W / "imports_rows.csv").exists():
    rows = pd.read_csv(W / "imports_rows.csv")
    print(rows[["pass", "warmup_steps", "params", "matmul_params", "flops_per_step", "flops_counted_by",
                "attention_ran", "status"]].to_string())
EOF
  grep -h "left .* running, ended with it" $W/*/logs -r 2>/dev/null | head -5 >> $OUT/summary.txt
  for run in qb ql; do
    tail -5 $W/$run.log > $OUT/${run}_log_tail.txt
    for f in $W/$run/report/$run/tables/cost_*.csv; do [ -f "$f" ] && cp "$f" "$OUT/${run}_$(basename $f)"; done
  done
  cat $OUT/summary.txt
  ;;
*)
  echo "usage: $0 start|collect"; exit 2
  ;;
esac
