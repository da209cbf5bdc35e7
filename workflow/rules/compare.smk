# Comparing two runs: report/compare/<A>_vs_<B>/ from results/<A>/ and
# results/<B>/. It reads the runs' tables and measures nothing: the tables
# are not declared as input files, since Snakemake would then make them
# (run measurements) for a run named like this one's config. Instead a
# digest of the tables (sizes, modification times) is a param, so a changed
# or newly copied run rebuilds the comparison, and a run that is missing
# stops the build at once with one sentence naming what to do.
COMPARE = config["compare"]
COMPARE_DIR = "report/compare/{a}_vs_{b}"
COMPARE_TEMPLATES = sorted(
    str(p)
    for p in (BASE / "workflow/templates").glob("*.j2")
    # compare.* and what it includes (sections.*, style.*): all but the study's own report.*
    if not p.name.startswith("report.")
)
# The comparison's wording: each section's templates (lmstudy/sections/<name>/*.j2, compare.j2 among
# them) and those the sections' comparisons share (lmstudy/report/*.j2): an edit rerenders it.
COMPARE_WORDING = sorted(
    [*SECTION_TEMPLATES, *(str(p) for p in (BASE / "lmstudy/report").glob("*.j2"))]
)


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    compare,


rule compare:
    input:
        templates=COMPARE_TEMPLATES,
        wording=COMPARE_WORDING,
        style=FIGURE_STYLE,
    output:
        html=f"{COMPARE_DIR}/index.html",
        md=f"{COMPARE_DIR}/report.md",
    log:
        "logs/compare/{a}_vs_{b}.log",
    benchmark:
        "logs/compare/{a}_vs_{b}.benchmark.tsv"
    wildcard_constraints:
        a=r"[A-Za-z0-9.-][A-Za-z0-9._-]*",
        b=r"[A-Za-z0-9.-][A-Za-z0-9._-]*",
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("compare_runs"),
        tables_a=lambda w: run_tables_digest(w.a),
        tables_b=lambda w: run_tables_digest(w.b),
        min_effect=flag("--min-effect", COMPARE["min_effect"]),
        gpu_min_effect=flag("--gpu-min-effect", COMPARE["gpu_min_effect"]),
        gpu_agreement=flag("--gpu-agreement", COMPARE["gpu_agreement"]),
        compiled_agreement=flag("--compiled-agreement", COMPARE["compiled_agreement"]),
        min_gpu_busy=flag("--min-gpu-busy", config["noise"]["min_gpu_busy"]),
        max_spread=flag("--max-spread", config["noise"]["max_spread"]),
        out=lambda w, output: str(Path(output.html).parent),
    shell:
        "lmstudy_cpu compare_runs --results results --a {wildcards.a} --b {wildcards.b}"
        " {params.min_effect} {params.gpu_min_effect} {params.gpu_agreement}"
        " {params.compiled_agreement} {params.min_gpu_busy} {params.max_spread}"
        " --style {input.style}"
        ' --templates "$(dirname {input.templates[0]})" --out {params.out} > {log} 2>&1'
