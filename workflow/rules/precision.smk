# Section 3: mixed precision. One job runs the accumulation experiment, and
# the toy model and the study's model (config model:, at its smallest size and
# shortest context: lmstudy.job_spec) under fp16 and bf16 autocast on the
# study's device; the bf16 vs fp32 speed-ups come from the timing section's table.
PRECISION = config["precision"]


rule precision_experiments:
    output:
        accumulation=report(
            f"{RESULTS}/precision/accumulation.csv",
            caption="../report/precision_tables.rst",
            category="Tables",
            labels={"section": "precision", "table": "accumulation"},
        ),
        dtypes=report(
            f"{RESULTS}/precision/toy_dtypes.csv",
            caption="../report/precision_tables.rst",
            category="Tables",
            labels={"section": "precision", "table": "toy model dtypes"},
        ),
        model_dtypes=report(
            f"{RESULTS}/precision/model_dtypes.csv",
            caption="../report/precision_tables.rst",
            category="Tables",
            labels={"section": "precision", "table": "study model dtypes"},
        ),
        phases=phases_file("precision", "precision_experiments"),
    log:
        f"{LOGS}/precision/experiments.log",
    benchmark:
        benchmark_file("precision", "precision_experiments")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=model_code_version("precision"),
        spec=job_spec("precision"),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure precision --spec {params.spec:q}"
        " --accumulation {output.accumulation} --dtypes {output.dtypes}"
        " --model-dtypes {output.model_dtypes}"
        " --phases {output.phases} > {log} 2>&1"


# The normalisation experiment (section 3 b) on the study model's own activations:
# the first size and the shortest context of the timing section, the study's
# smallest model, whose residual stream is as any size's at initialisation.
# The size is in the file's name: changing that size reruns this job, as its own.
NORM_SIZE = config["timing"]["sizes"][0]
NORM_ERRORS = f"{RESULTS}/precision/norm_errors_{NORM_SIZE}.csv"


rule precision_norms:
    output:
        errors=report(
            f"{RESULTS}/precision/norm_errors_{{size}}.csv",
            caption="../report/precision_tables.rst",
            category="Tables",
            labels={"section": "precision", "table": "norm errors"},
        ),
        phases=phases_file("precision", "precision_norms", "{size}"),
    log:
        f"{LOGS}/precision/norms_{{size}}.log",
    benchmark:
        benchmark_file("precision", "precision_norms", "{size}")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=job_code_version("norms"),
        spec=lambda w: job_spec("norms", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure norms --spec {params.spec:q} --out {output.errors}"
        " --phases {output.phases} > {log} 2>&1"


if PRECISION["enabled"]:
    count_cost("precision", "precision_experiments", measuring=True)
    count_cost(
        "precision",
        "precision_norms",
        "{size}",
        jobs=[{"size": NORM_SIZE}],
        measuring=True,
    )
    SECTION_TABLES["precision"] = [
        f"{RESULTS}/precision/accumulation.csv",
        f"{RESULTS}/precision/toy_dtypes.csv",
        f"{RESULTS}/precision/model_dtypes.csv",
        NORM_ERRORS,
    ] + ([f"{RESULTS}/timing/timing.csv"] if config["timing"]["enabled"] else [])
