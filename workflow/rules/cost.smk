# Section 8: the study's own cost. Every job's wall time (Snakemake's
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
        "lmstudy study_cost --out {output} --benchmarks {input.benchmarks}"
        " --phases {input.phases} > {log} 2>&1"


SECTION_TABLES["cost"] = [f"{RESULTS}/cost/jobs.csv"]
