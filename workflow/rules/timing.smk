# Section 1: end-to-end timing. One job per size x context length x
# precision x variant; one fresh process per pass times every warm-up count.
TIMING = config["timing"]
TIMING_JOB = "{size}_ctx{ctx}_{precision}_{variant}"
TIMING_RAW = f"{RESULTS}/timing/raw/{TIMING_JOB}.csv"
# The naive model in every precision; the other variants (sdpa, -compile:
# only where timing.variants lists them) in bf16 only (lmstudy.plan). The
# optimization ladder itself is section 7's (ladder.smk).
TIMING_CONFIGS = plan.timing_configurations(TIMING)
TIMING_JOBS = [TIMING_RAW.format(**job) for job in TIMING_CONFIGS]


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    aggregate_timing,


rule time_model:
    output:
        rows=TIMING_RAW,
        phases=phases_file("timing", "time_model", TIMING_JOB),
    log:
        f"{LOGS}/timing/{{size}}_ctx{{ctx}}_{{precision}}_{{variant}}.log",
    benchmark:
        benchmark_file("timing", "time_model", TIMING_JOB)
    priority: job_priority("timing")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=model_code_version("timing"),
        spec=lambda w: job_spec("timing", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure timing --spec {params.spec:q} --out {output.rows}"
        " --phases {output.phases} > {log} 2>&1"


rule aggregate_timing:
    input:
        TIMING_JOBS,
    output:
        report(
            f"{RESULTS}/timing/timing.csv",
            caption="../report/timing_table.rst",
            category="Tables",
            labels={"section": "timing", "table": "all measurements"},
        ),
    log:
        f"{LOGS}/timing/aggregate.log",
    benchmark:
        benchmark_file("timing", "aggregate_timing")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("aggregate"),
        min_gpu_busy=flag("--min-gpu-busy", config["noise"]["min_gpu_busy"]),
        max_spread=flag("--max-spread", config["noise"]["max_spread"]),
    shell:
        "lmstudy_cpu aggregate --out {output} {params.min_gpu_busy} {params.max_spread}"
        " {input} > {log} 2>&1"


if TIMING["enabled"]:
    SECTION_TABLES["timing"] = [f"{RESULTS}/timing/timing.csv"]
    count_cost("timing", "time_model", TIMING_JOB, TIMING_CONFIGS, measuring=True)
    count_cost("timing", "aggregate_timing")
