# The data-parallel section: the study's model (config model:) trained data-parallel in each
# version by hand and with DistributedDataParallel, one job per size and number
# of processes (one GPU each on a GPU run: resources gpu=N; Gloo on the CPUs).
DDP = config["ddp"]
DDP_JOB = "{size}_{world_size}"
DDP_RAW = f"{RESULTS}/ddp/raw/{DDP_JOB}.csv"
DDP_CONFIGS = grid(
    size=DDP["sizes"],
    world_size=(
        fitting_world_sizes("ddp", DDP["world_sizes"])
        if DDP["enabled"]
        else DDP["world_sizes"]
    ),
)


localrules:
    aggregate_ddp,


rule train_ddp:
    output:
        rows=DDP_RAW,
        phases=phases_file("ddp", "train_ddp", DDP_JOB),
    log:
        f"{LOGS}/ddp/{DDP_JOB}.log",
    benchmark:
        benchmark_file("ddp", "train_ddp", DDP_JOB)
    wildcard_constraints:
        size=alternatives(DDP["sizes"]),
        world_size=r"\d+",
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(gpus=lambda w: group_gpus(w.world_size)),
    params:
        code=model_code_version("ddp"),
        spec=lambda w: job_spec("ddp", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} LMSTUDY_GPU_COUNT={resources.gpu}"
        " lmstudy_gpu measure ddp --spec {params.spec:q}"
        " --out {output.rows} --phases {output.phases} > {log} 2>&1"


rule aggregate_ddp:
    input:
        [DDP_RAW.format(**job) for job in DDP_CONFIGS],
    output:
        f"{RESULTS}/ddp/ddp.csv",
    log:
        f"{LOGS}/ddp/aggregate.log",
    benchmark:
        benchmark_file("ddp", "aggregate_ddp")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("aggregate"),
    shell:
        "lmstudy_cpu aggregate --out {output} {input} > {log} 2>&1"


if DDP["enabled"] and DDP_CONFIGS:
    SECTION_TABLES["ddp"] = [f"{RESULTS}/ddp/ddp.csv"]
    count_cost("ddp", "train_ddp", DDP_JOB, DDP_CONFIGS, measuring=True)
    count_cost("ddp", "aggregate_ddp")
