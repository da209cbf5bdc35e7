#!/usr/bin/env bash
# Does this checkout's code turn a run's measurements into the same tables, figures, report and
# comparison as another checkout did? For a refactor that must not change what the report says:
# the measurements are taken as they are and everything derived from them is made again here,
# then compared byte for byte.
#
#   bash tools/same_report.sh /path/to/other/checkout [RUN_A RUN_B]   (default s1 s2, preset smoke;
#                                                                      RUN_B was made with batch_size=3)
#
# The other checkout has made RUN_A and RUN_B and report/compare/RUN_A_vs_RUN_B. Their results are
# copied here (mtimes kept). Here: every aggregation runs again and its tables are compared; then,
# from the copied results as they were (a rerun aggregation's new wall time, which the cost section
# counts, is no difference of code), each section's figures are drawn again beside the other's and
# the report and the comparison are rendered again.
set -euo pipefail
other=$(cd "$1" && pwd)
runs=("${2:-s1}" "${3:-s2}")
snakemake=${SNAKEMAKE:-.venv/bin/snakemake}
python=${PYTHON:-.venv/bin/python}
aggregations=(aggregate_timing aggregate_nsys aggregate_attention aggregate_compile aggregate_ladder
  memory_summary memory_table)
# The sizes the figures rule passes: the smoke preset's, laid over config.yaml's.
sizes=$("$python" -c "import yaml; from lmstudy import config as c; b = yaml.safe_load(open('config.yaml'));
b['preset'] = 'smoke'; print(' '.join(c.load(b, 'workflow/schemas/config.schema.yaml')['sizes']))")
status=0
# As the other made them: RUN_A's report before RUN_B existed (its header counts the runs beside it).
for run in "${runs[@]}"; do rm -rf "results/$run" "report/$run" "logs/$run"; done
for run in "${runs[@]}"; do
  settings=(preset=smoke "run=$run")
  [ "$run" = "${runs[1]}" ] && settings+=(batch_size=3)
  mkdir -p results report
  cp -a "$other/results/$run" results/
  "$snakemake" --cores 2 --quiet --rerun-triggers mtime --forcerun "${aggregations[@]}" \
    --until "${aggregations[@]}" --config "${settings[@]}" >/dev/null
  for table in $(cd "$other/results/$run" && find . -name '*.csv' -not -path './benchmarks/*' | sort); do
    cmp -s "$other/results/$run/$table" "results/$run/$table" || { echo "differs: results/$run/$table"; status=1; }
  done
  # The report from the other's tables, as they were (their jobs' benchmarks and mtimes too): the
  # aggregations were compared above, the rendering is compared below.
  rm -rf "results/$run" && cp -a "$other/results/$run" results/
  for section in $(ls "$other/results/$run/figures"); do
    drawn=$(mktemp -d)
    "$python" -m lmstudy make_figures --section "$section" --results "results/$run" \
      --style workflow/report/figures.mplstyle --out "$drawn/$section" --sizes $sizes >/dev/null
    diff -rq -x .snakemake_timestamp "$other/results/$run/figures/$section" "$drawn/$section" || status=1
    rm -rf "$drawn"
  done
  "$snakemake" "report/$run/index.html" --cores 2 --quiet --rerun-triggers mtime --forcerun report \
    --config "${settings[@]}" >/dev/null
  diff -rq "$other/report/$run" "report/$run" || status=1
done
rm -rf "report/compare/${runs[0]}_vs_${runs[1]}"
"$snakemake" "report/compare/${runs[0]}_vs_${runs[1]}/index.html" --cores 2 --quiet \
  --config preset=smoke "run=${runs[0]}" >/dev/null
diff -rq "$other/report/compare/${runs[0]}_vs_${runs[1]}" "report/compare/${runs[0]}_vs_${runs[1]}" || status=1
[ "$status" = 0 ] && echo "same: tables, figures, reports and comparison of ${runs[*]} are byte-identical to $other's"
exit "$status"
