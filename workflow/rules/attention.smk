# Section 5: attention alone. One job per implementation x precision x head
# size; it sweeps the sequence lengths in one process, smallest first, and
# records out-of-memory as a result row.
ATTENTION = config["attention"]
ATTENTION_JOB = "{impl}_{precision}_d{head_dim}"
ATTENTION_RAW = f"{RESULTS}/attention/raw/{ATTENTION_JOB}.csv"
ATTENTION_CONFIGS = grid(
    impl=ATTENTION["implementations"],
    precision=ATTENTION["precisions"],
    head_dim=ATTENTION["head_dims"],
)
ATTENTION_JOBS = [ATTENTION_RAW.format(**job) for job in ATTENTION_CONFIGS]


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    aggregate_attention,


rule attention_sweep:
    output:
        rows=ATTENTION_RAW,
        phases=phases_file("attention", "attention_sweep", ATTENTION_JOB),
    log:
        f"{LOGS}/attention/{{impl}}_{{precision}}_d{{head_dim}}.log",
    benchmark:
        benchmark_file("attention", "attention_sweep", ATTENTION_JOB)
    wildcard_constraints:
        impl="naive|naive-compile|sdpa",
        head_dim=r"\d+",
    priority: job_priority("attention")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=job_code_version("attention"),
        spec=lambda w: job_spec("attention", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure attention --spec {params.spec:q} --out {output.rows}"
        " --phases {output.phases} > {log} 2>&1"


rule aggregate_attention:
    input:
        ATTENTION_JOBS,
    output:
        report(
            f"{RESULTS}/attention/attention.csv",
            caption="../report/attention_table.rst",
            category="Tables",
            labels={"section": "attention", "table": "all measurements"},
        ),
    log:
        f"{LOGS}/attention/aggregate.log",
    benchmark:
        benchmark_file("attention", "aggregate_attention")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("aggregate"),
        min_gpu_busy=flag("--min-gpu-busy", config["noise"]["min_gpu_busy"]),
        max_spread=flag("--max-spread", config["noise"]["max_spread"]),
    shell:
        "lmstudy_cpu aggregate --out {output} {params.min_gpu_busy} {params.max_spread}"
        " {input} > {log} 2>&1"


if ATTENTION["enabled"]:
    SECTION_TABLES["attention"] = [f"{RESULTS}/attention/attention.csv"]
    count_cost(
        "attention", "attention_sweep", ATTENTION_JOB, ATTENTION_CONFIGS, measuring=True
    )
    count_cost("attention", "aggregate_attention")
