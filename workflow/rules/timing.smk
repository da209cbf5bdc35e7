# Section 1: end-to-end timing. One job per size x context length x
# precision x variant; it measures every pass and warm-up count.
TIMING = config["timing"]
TIMING_RAW = f"{RESULTS}/timing/raw/{{size}}_ctx{{ctx}}_{{precision}}_{{variant}}.csv"
# The naive model in every precision; the other variants are ladder rungs,
# measured in bf16 only.
TIMING_JOBS = [
    path
    for variant in TIMING["variants"]
    for path in expand(
        TIMING_RAW,
        size=TIMING["sizes"],
        ctx=TIMING["context_lengths"],
        precision=(
            TIMING["precisions"]
            if variant == "naive"
            else [p for p in TIMING["precisions"] if p == "bf16"]
        ),
        variant=variant,
    )
]


rule time_model:
    output:
        TIMING_RAW,
    log:
        f"{LOGS}/timing/{{size}}_ctx{{ctx}}_{{precision}}_{{variant}}.log",
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        dims=lambda w: size_dims(w.size),
        batch_size=flag("--batch-size", config["batch_size"]),
        vocab_size=flag("--vocab-size", config["vocab_size"]),
        passes=flag("--passes", TIMING["passes"]),
        warmup_steps=flag("--warmup-steps", TIMING["warmup_steps"]),
        timed_steps=flag("--timed-steps", TIMING["timed_steps"]),
        device=flag("--device", config["device"]),
        tf32="--tf32" if config["tf32"] else "",
        memory_cap=flag("--memory-cap-gb", config.get("memory_cap_gb")),
    shell:
        "lmstudy time_model --out {output} --size {wildcards.size}"
        " --d-model {params.dims[d_model]} --d-ff {params.dims[d_ff]}"
        " --num-layers {params.dims[num_layers]} --num-heads {params.dims[num_heads]}"
        " --context-length {wildcards.ctx} --precision {wildcards.precision}"
        " --variant {wildcards.variant} {params.batch_size}"
        " {params.vocab_size} {params.passes}"
        " {params.warmup_steps} {params.timed_steps}"
        " {params.device} {params.tf32} {params.memory_cap} > {log} 2>&1"


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
    conda:
        LMSTUDY_ENV
    shell:
        "lmstudy aggregate --out {output} {input} > {log} 2>&1"


if TIMING["enabled"]:
    SECTION_TABLES["timing"] = [f"{RESULTS}/timing/timing.csv"]
