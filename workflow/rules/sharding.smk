# The optimizer-state sharding section: AdamW whole and sharded across the
# ranks, one job per size and number of processes (one GPU each on a GPU run).
SHARDING = config["sharding"]
SHARDING_JOB = "{size}_{world_size}"
SHARDING_RAW = f"{RESULTS}/sharding/raw/{SHARDING_JOB}.csv"
SHARDING_CONFIGS = grid(
    size=SHARDING["sizes"],
    world_size=(
        fitting_world_sizes("sharding", SHARDING["world_sizes"])
        if SHARDING["enabled"]
        else SHARDING["world_sizes"]
    ),
)


localrules:
    aggregate_sharding,


rule shard_optimizer:
    output:
        rows=SHARDING_RAW,
        phases=phases_file("sharding", "shard_optimizer", SHARDING_JOB),
    log:
        f"{LOGS}/sharding/{SHARDING_JOB}.log",
    benchmark:
        benchmark_file("sharding", "shard_optimizer", SHARDING_JOB)
    wildcard_constraints:
        size=alternatives(SHARDING["sizes"]),
        world_size=r"\d+",
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(gpus=lambda w: group_gpus(w.world_size)),
    params:
        code=model_code_version("sharding"),
        spec=lambda w: job_spec("sharding", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} LMSTUDY_GPU_COUNT={resources.gpu}"
        " lmstudy_gpu measure sharding --spec {params.spec:q}"
        " --out {output.rows} --phases {output.phases} > {log} 2>&1"


rule aggregate_sharding:
    input:
        [SHARDING_RAW.format(**job) for job in SHARDING_CONFIGS],
    output:
        f"{RESULTS}/sharding/sharding.csv",
    log:
        f"{LOGS}/sharding/aggregate.log",
    benchmark:
        benchmark_file("sharding", "aggregate_sharding")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("aggregate"),
    shell:
        "lmstudy_cpu aggregate --out {output} {input} > {log} 2>&1"


if SHARDING["enabled"] and SHARDING_CONFIGS:
    SECTION_TABLES["sharding"] = [f"{RESULTS}/sharding/sharding.csv"]
    count_cost(
        "sharding", "shard_optimizer", SHARDING_JOB, SHARDING_CONFIGS, measuring=True
    )
    count_cost("sharding", "aggregate_sharding")
