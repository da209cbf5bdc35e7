#!/usr/bin/env bash
# Does this checkout's code turn a run's measurements into the same tables, report and
# comparison as another checkout did? For a refactor that must not change what the
# report says: the measurements are taken as they are and everything derived from them
# is made again here, then compared byte for byte.
#
#   bash tools/same_report.sh /path/to/other/checkout [RUN_A RUN_B]   (default s1 s2, preset smoke)
#
# The other checkout has made RUN_A and RUN_B (and report/compare/RUN_A_vs_RUN_B). Their
# results are copied here (mtimes kept); every rule that is not a measurement is forced
# again; the jobs' benchmarks are put back as they were before the cost section counts
# them (re-running an aggregation writes a new benchmark, which is not a difference of code).
set -euo pipefail
other=$(cd "$1" && pwd)
runs=("${2:-s1}" "${3:-s2}")
snakemake=${SNAKEMAKE:-.venv/bin/snakemake}
derived_tables=(aggregate_timing aggregate_nsys aggregate_attention aggregate_compile aggregate_ladder
  memory_summary memory_table)
status=0
for run in "${runs[@]}"; do
  rm -rf "results/$run" "report/$run"
  mkdir -p results
  cp -a "$other/results/$run" results/
  cp -a "results/$run/benchmarks" "/tmp/same_report_benchmarks_$run"
  "$snakemake" --cores 2 --quiet all --config preset=smoke "run=$run" \
    $([ "$run" = "${runs[1]}" ] && echo batch_size=3) \
    --rerun-triggers mtime --forcerun "${derived_tables[@]}" --until "${derived_tables[@]}" >/dev/null
  rm -rf "results/$run/benchmarks" && mv "/tmp/same_report_benchmarks_$run" "results/$run/benchmarks"
  "$snakemake" --cores 2 --quiet all --config preset=smoke "run=$run" \
    $([ "$run" = "${runs[1]}" ] && echo batch_size=3) \
    --rerun-triggers mtime --forcerun study_cost figures report >/dev/null
  for table in $(cd "$other/results/$run" && find . -maxdepth 2 -name '*.csv' -not -path './benchmarks/*'); do
    cmp -s "$other/results/$run/$table" "results/$run/$table" || { echo "differs: results/$run/$table"; status=1; }
  done
  diff -rq "$other/report/$run" "report/$run" || status=1
done
rm -rf "report/compare/${runs[0]}_vs_${runs[1]}"
"$snakemake" --cores 2 --quiet "report/compare/${runs[0]}_vs_${runs[1]}/index.html" \
  --config preset=smoke "run=${runs[0]}" >/dev/null
diff -rq "$other/report/compare/${runs[0]}_vs_${runs[1]}" "report/compare/${runs[0]}_vs_${runs[1]}" || status=1
[ "$status" = 0 ] && echo "same: tables, reports and comparison of ${runs[*]} are byte-identical to $other's"
exit "$status"
