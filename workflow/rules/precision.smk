# Section 3: mixed precision. One job runs the accumulation experiment and
# the toy model under fp16 and bf16 autocast on the study's device; the
# bf16 vs fp32 speed-ups come from the timing section's table.
PRECISION = config["precision"]


rule precision_experiments:
    output:
        accumulation=f"{RESULTS}/precision/accumulation.csv",
        dtypes=f"{RESULTS}/precision/toy_dtypes.csv",
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
        code=code_version("precision_experiments"),
        device=flag("--device", config["device"]),
        tf32="--tf32" if config["tf32"] else "",
    shell:
        "lmstudy_gpu precision_experiments {params.device} {params.tf32}"
        " --accumulation {output.accumulation} --dtypes {output.dtypes}"
        " --phases {output.phases} > {log} 2>&1"


if PRECISION["enabled"]:
    count_cost("precision", "precision_experiments", measuring=True)
    SECTION_TABLES["precision"] = [
        f"{RESULTS}/precision/accumulation.csv",
        f"{RESULTS}/precision/toy_dtypes.csv",
    ] + ([f"{RESULTS}/timing/timing.csv"] if config["timing"]["enabled"] else [])
