# The report side: figures and the rendered report, from aggregated tables.
# No job here touches a GPU, so editing a template or the figure style
# reruns only these.
#
# Each section's rule file registers its aggregated tables before this file
# is included:  SECTION_TABLES["<section>"] = [paths]. The section's library
# module lmstudy/sections/<section>.py draws its figures and builds its part
# of the report from them.
FIGURE_STYLE = str(BASE / "workflow/report/figures.mplstyle")
TEMPLATES = sorted(str(p) for p in (BASE / "workflow/templates").glob("*.j2"))
REPORT_FILES = ["report/index.html", "report/report.md"]


rule figures:
    input:
        tables=lambda w: SECTION_TABLES[w.section],
        style=FIGURE_STYLE,
    output:
        directory(RESULTS + "/figures/{section}"),
    log:
        LOGS + "/figures/{section}.log",
    shell:
        "{PYTHON} {SCRIPTS}/make_figures.py --section {wildcards.section}"
        " --results {RESULTS} --style {input.style} --out {output} > {log} 2>&1"


rule report:
    input:
        tables=[t for tables in SECTION_TABLES.values() for t in tables],
        figures=expand(RESULTS + "/figures/{section}", section=SECTION_TABLES),
        templates=TEMPLATES,
    output:
        REPORT_FILES,
    params:
        sections=list(SECTION_TABLES),
        title=config["report"]["title"],
    log:
        LOGS + "/report.log",
    shell:
        "{PYTHON} {SCRIPTS}/render_report.py --results {RESULTS} --run {RUN}"
        " --sections {params.sections} --title {params.title:q}"
        " --templates {BASE}/workflow/templates --out report > {log} 2>&1"
