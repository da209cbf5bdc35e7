# Section 6: the whole model under torch.compile. One job per size x
# precision x attention at the section's context length; it measures eager
# then compiled for each pass, the compile time apart. The optimization
# ladder of the training step is section 7's (ladder.smk).
COMPILE = config["compile"]
COMPILE_JOB = "{size}_ctx{ctx}_{precision}_{attention}"
COMPILE_RAW = f"{RESULTS}/compile/raw/{COMPILE_JOB}.csv"
COMPILE_CONFIGS = grid(
    size=COMPILE["sizes"],
    ctx=COMPILE["context_length"],
    precision=COMPILE["precisions"],
    attention=COMPILE["attention"],
)
COMPILE_JOBS = [COMPILE_RAW.format(**job) for job in COMPILE_CONFIGS]


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    aggregate_compile,


rule compile_model:
    output:
        rows=COMPILE_RAW,
        phases=phases_file("compile", "compile_model", COMPILE_JOB),
    log:
        f"{LOGS}/compile/{{size}}_ctx{{ctx}}_{{precision}}_{{attention}}.log",
    benchmark:
        benchmark_file("compile", "compile_model", COMPILE_JOB)
    wildcard_constraints:
        attention="naive|sdpa",
    priority: job_priority("compile")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=model_code_version("compile"),
        spec=lambda w: job_spec("compile", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure compile --spec {params.spec:q} --out {output.rows}"
        " --phases {output.phases} > {log} 2>&1"


rule aggregate_compile:
    input:
        COMPILE_JOBS,
    output:
        report(
            f"{RESULTS}/compile/compile.csv",
            caption="../report/compile_table.rst",
            category="Tables",
            labels={"section": "compile", "table": "all measurements"},
        ),
    log:
        f"{LOGS}/compile/aggregate.log",
    benchmark:
        benchmark_file("compile", "aggregate_compile")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("aggregate"),
        min_gpu_busy=flag("--min-gpu-busy", config["noise"]["min_gpu_busy"]),
        max_spread=flag("--max-spread", config["noise"]["max_spread"]),
    shell:
        "lmstudy_cpu aggregate --out {output} {params.min_gpu_busy} {params.max_spread}"
        " {input} > {log} 2>&1"


if COMPILE["enabled"]:
    SECTION_TABLES["compile"] = [f"{RESULTS}/compile/compile.csv"]
    count_cost("compile", "compile_model", COMPILE_JOB, COMPILE_CONFIGS, measuring=True)
    count_cost("compile", "aggregate_compile")
