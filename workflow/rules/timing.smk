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


rule time_model:
    output:
        rows=TIMING_RAW,
        phases=phases_file("timing", "time_model", TIMING_JOB),
    log:
        f"{LOGS}/timing/{{size}}_ctx{{ctx}}_{{precision}}_{{variant}}.log",
    benchmark:
        benchmark_file("timing", "time_model", TIMING_JOB)
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=model_code_version("time_model"),
        model=lambda w: model_flag(w.size),
        dims=lambda w: size_dims(w.size),
        batch_size=flag("--batch-size", config["batch_size"]),
        vocab_size=flag("--vocab-size", config["vocab_size"]),
        passes=lambda w: flag(
            "--passes", plan.timing_passes(w.variant, TIMING["passes"])
        ),
        warmup_steps=flag("--warmup-steps", TIMING["warmup_steps"]),
        timed_steps=flag("--timed-steps", TIMING["timed_steps"]),
        processes=noise_flags(),
        device=flag("--device", config["device"]),
        tf32="--tf32" if config["tf32"] else "",
        memory_cap=flag("--memory-cap-gb", config.get("memory_cap_gb")),
    shell:
        "lmstudy_gpu time_model --out {output.rows} --phases {output.phases}"
        " --size {wildcards.size}"
        " --d-model {params.dims[d_model]} --d-ff {params.dims[d_ff]}"
        " --num-layers {params.dims[num_layers]} --num-heads {params.dims[num_heads]}"
        " --context-length {wildcards.ctx} --precision {wildcards.precision}"
        " --variant {wildcards.variant} {params.batch_size}"
        " {params.vocab_size} {params.passes}"
        " {params.warmup_steps} {params.timed_steps} {params.processes}"
        " {params.device} {params.tf32} {params.memory_cap} {params.model} > {log} 2>&1"


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
        "lmstudy aggregate --out {output} {params.min_gpu_busy} {params.max_spread}"
        " {input} > {log} 2>&1"


if TIMING["enabled"]:
    SECTION_TABLES["timing"] = [f"{RESULTS}/timing/timing.csv"]
    count_cost("timing", "time_model", TIMING_JOB, TIMING_CONFIGS, measuring=True)
    count_cost("timing", "aggregate_timing")
