# The cost section: the study's own cost. Every job's wall time (Snakemake's
# benchmark records) and the measuring jobs' phases, in one table. Included
# after every section, so that their jobs and figures are all counted; the
# report, which shows this table, cannot count itself.
for _section in list(SECTION_TABLES):
    count_cost(_section, "figures", "{section}", [{"section": _section}])


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    study_cost,


rule study_cost:
    input:
        benchmarks=COST_RECORDS["benchmarks"],
        phases=COST_RECORDS["phases"],
    output:
        report(
            f"{RESULTS}/cost/jobs.csv",
            caption="../report/cost_table.rst",
            category="Tables",
            labels={"section": "cost", "table": "jobs"},
        ),
    log:
        f"{LOGS}/cost/study_cost.log",
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("study_cost"),
    shell:
        "lmstudy_cpu study_cost --out {output} --benchmarks {input.benchmarks}"
        " --phases {input.phases} > {log} 2>&1"


SECTION_TABLES["cost"] = [f"{RESULTS}/cost/jobs.csv"]

# `snakemake --report` as Snakemake's docs write it (no --config) reports the default
# run with the full preset: where this config's jobs did not run here, Snakemake would
# fail only after a warning per missing file. Said at once instead, with the fix.
if study_config.report_target(sys.argv):
    try:
        study_config.check_writable(
            study_config.report_target(sys.argv), "snakemake --report"
        )
        study_config.check_run_to_report(RUN, COST_RECORDS["benchmarks"])
    except study_config.ConfigError as error:
        raise WorkflowError(str(error)) from None

# Every job of the config has its benchmark record: a plan far beyond the study's is said
# before Snakemake spends minutes building its DAG.
PLAN_WARNING = study_config.many_jobs_warning(COST_RECORDS["benchmarks"], BENCHMARKS)
if PLAN_WARNING:
    print(f"warning: {PLAN_WARNING}", file=sys.stderr, flush=True)
