# The report side: figures and the rendered report, from aggregated tables.
# No job here touches a GPU, so editing a template or the figure style
# reruns only these.
#
# Each section's rule file registers its aggregated tables before this file
# is included:  SECTION_TABLES["<section>"] = [paths]. The section's library
# package lmstudy/sections/<section>/ draws its figures and builds its part
# of the report from them, through its contract (lmstudy.report.contract); the
# report shows the sections in the registry's order (lmstudy.registry.NAMES).
FIGURE_STYLE = str(BASE / "workflow/report/figures.mplstyle")
TEMPLATES = sorted(
    str(p)
    for p in (BASE / "workflow/templates").glob("*.j2")
    if not p.name.startswith("compare.")
)
# Each section's method paragraphs (lmstudy/sections/<name>/method.j2): an edit rerenders the
# report, as an edit of its own templates does.
SECTION_TEMPLATES = sorted(str(p) for p in (BASE / "lmstudy/sections").glob("*/*.j2"))
# The full study's grids (this checkout's config.yaml under its own preset): what the report says
# a smaller run left out (lmstudy.report.coverage). A param, so the job reads no config file.
FULL_STUDY = study_config.full_study()
# Each run its own report folder: run=b never overwrites run a's report.
REPORT_DIR = f"report/{RUN}"
REPORT_FILES = [f"{REPORT_DIR}/index.html", f"{REPORT_DIR}/report.md"]
# The aggregated tables (results/<run>/<section>/<name>.csv) whose rows carry
# the provenance the report's header shows.
ENVIRONMENT_TABLES = sorted(
    {
        t
        for tables in SECTION_TABLES.values()
        for t in tables
        if t.endswith(".csv") and Path(t).parent.parent == Path(RESULTS)
    }
)


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    figures,
    report,


rule figures:
    input:
        tables=lambda w: SECTION_TABLES[w.section],
        style=FIGURE_STYLE,
    output:
        report(
            directory(f"{RESULTS}/figures/{{section}}"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
            subcategory="{section}",
            labels={"section": "{section}", "figure": "{name}"},
        ),
    log:
        f"{LOGS}/figures/{{section}}.log",
    benchmark:
        benchmark_file("{section}", "figures", "{section}")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("make_figures"),
        run=RUN,
        sizes=flag("--sizes", list(config["sizes"])),
    shell:
        "lmstudy_cpu make_figures --section {wildcards.section} {params.sizes}"
        " --results results/{params.run} --style {input.style} --out {output} > {log} 2>&1"


rule report:
    input:
        tables=[t for tables in SECTION_TABLES.values() for t in tables],
        figures=expand(f"{RESULTS}/figures/{{section}}", section=SECTION_TABLES),
        templates=TEMPLATES,
        section_templates=SECTION_TEMPLATES,
    output:
        html=report(
            REPORT_FILES[0],
            caption="../report/study_report.rst",
            category="Report",
            labels={"format": "HTML"},
        ),
        md=report(
            REPORT_FILES[1],
            caption="../report/study_report.rst",
            category="Report",
            labels={"format": "Markdown"},
        ),
        # every table as CSV (named by content) and the figures the pages show
        tables=directory(f"{REPORT_DIR}/tables"),
        figures=directory(f"{REPORT_DIR}/figures"),
    log:
        f"{LOGS}/report.log",
    benchmark:
        benchmark_file("report", "report")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("render_report"),
        run=RUN,
        sections=flag("--sections", list(SECTION_TABLES)),
        environment=flag("--environment-tables", ENVIRONMENT_TABLES),
        sizes=flag("--sizes", list(config["sizes"])),
        title=flag("--title", config["report"]["title"]),
        full_study=flag("--full-study", json.dumps(FULL_STUDY, sort_keys=True)),
        out=lambda w, output: str(Path(output.html).parent),
    shell:
        "lmstudy_cpu render_report --results results/{params.run} --run {params.run}"
        " {params.sections} {params.environment} {params.sizes} {params.title} {params.full_study}"
        ' --templates "$(dirname {input.templates[0]})" --out {params.out} > {log} 2>&1'


onsuccess:
    # Where the run's report is, said last: a newcomer's first question after a run.
    if Path(REPORT_FILES[0]).exists():
        print(
            f"The report of run {RUN}: {Path(REPORT_FILES[0]).resolve()} (open it in a browser).",
            file=sys.stderr,
        )
