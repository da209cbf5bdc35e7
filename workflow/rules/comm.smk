# The communication section: all-reduce of float32 tensors of each size, one
# job per backend and number of processes; NCCL jobs lease one GPU per process
# (resources: gpu=N, lmstudy.launch.gpu_lease), Gloo's run on the CPUs.
# On a CPU run only Gloo is measured.
from lmstudy.sections.comm.jobs import backends as comm_backends

COMM = config["comm"]
COMM_JOB = "{backend}_{world_size}"
COMM_RAW = f"{RESULTS}/comm/raw/{COMM_JOB}.csv"
# NCCL's numbers of processes this run has GPUs for (the others left out, said so); Gloo's all.
COMM_CONFIGS = [
    job
    for backend in comm_backends(config)
    for job in grid(
        backend=backend,
        world_size=(
            fitting_world_sizes("comm", COMM["world_sizes"], on_gpu=backend == "nccl")
            if COMM["enabled"]
            else COMM["world_sizes"]
        ),
    )
]


localrules:
    aggregate_comm,


rule allreduce:
    output:
        rows=COMM_RAW,
        phases=phases_file("comm", "allreduce", COMM_JOB),
    log:
        f"{LOGS}/comm/{COMM_JOB}.log",
    benchmark:
        benchmark_file("comm", "allreduce", COMM_JOB)
    wildcard_constraints:
        backend="nccl|gloo",
        world_size=r"\d+",
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(
            gpus=lambda w: group_gpus(w.world_size, on_gpu=w.backend == "nccl")
        ),
    params:
        code=job_code_version("allreduce"),
        spec=lambda w: job_spec("allreduce", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} LMSTUDY_GPU_COUNT={resources.gpu}"
        " lmstudy_gpu measure allreduce --spec {params.spec:q}"
        " --out {output.rows} --phases {output.phases} > {log} 2>&1"


rule aggregate_comm:
    input:
        [COMM_RAW.format(**job) for job in COMM_CONFIGS],
    output:
        f"{RESULTS}/comm/comm.csv",
    log:
        f"{LOGS}/comm/aggregate.log",
    benchmark:
        benchmark_file("comm", "aggregate_comm")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("aggregate"),
    shell:
        "lmstudy_cpu aggregate --out {output} {input} > {log} 2>&1"


if COMM["enabled"] and COMM_CONFIGS:
    SECTION_TABLES["comm"] = [f"{RESULTS}/comm/comm.csv"]
    count_cost("comm", "allreduce", COMM_JOB, COMM_CONFIGS, measuring=True)
    count_cost("comm", "aggregate_comm")
