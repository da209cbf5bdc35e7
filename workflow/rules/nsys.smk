# Section 2: Nsight Systems. One job per size x context length runs the
# profiled program under `nsys profile` (or torch.profiler): one process and
# one capture for every pass, keeping the report and its SQLite export, and
# writes each pass's tidy kernel and range tables.
NSYS = config["nsys"]
NSYS_JOB = "{size}_ctx{ctx}_{precision}"
NSYS_RAW = f"{RESULTS}/nsys/raw/{NSYS_JOB}"
NSYS_PASS_RAW = f"{NSYS_RAW}/{{nsys_pass}}"
NSYS_TABLES = [
    f"{RESULTS}/nsys/kernels.csv",
    f"{RESULTS}/nsys/ranges.csv",
    f"{RESULTS}/nsys/runs.csv",
]
# Which profiler the jobs use: settled by a job where the profile jobs run
# (a login node or laptop need no nsys; clusters often load it only on the
# compute nodes), once, before the first profile job.
NSYS_BACKEND = f"{RESULTS}/nsys/backend.json"


NSYS_CONFIGS = grid(
    size=NSYS["sizes"],
    ctx=NSYS["context_lengths"],
    precision=NSYS["precision"],
)
# Each pass's file `name`, in the job's folder, and for every profiled configuration.
NSYS_PASS_FILES = {
    name: expand(
        f"{NSYS_PASS_RAW}/{name}", nsys_pass=NSYS["passes"], allow_missing=True
    )
    for name in ("kernels.csv", "ranges.csv", "run.json")
}
NSYS_JOBS = {
    name: [path.format(**job) for job in NSYS_CONFIGS for path in paths]
    for name, paths in NSYS_PASS_FILES.items()
}


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    aggregate_nsys,


rule nsys_backend:
    output:
        NSYS_BACKEND,
    log:
        f"{LOGS}/nsys/backend.log",
    benchmark:
        benchmark_file("nsys", "nsys_backend")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=job_code_version("nsys_backend"),
        spec=job_spec("nsys_backend"),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure nsys_backend --spec {params.spec:q} --out {output} > {log} 2>&1"


rule profile_model:
    input:
        backend=NSYS_BACKEND,
    output:
        kernels=NSYS_PASS_FILES["kernels.csv"],
        ranges=NSYS_PASS_FILES["ranges.csv"],
        records=NSYS_PASS_FILES["run.json"],
        # the profile: .nsys-rep and .sqlite (nsys), or trace.json.gz (torch.profiler)
        profile=directory(f"{NSYS_RAW}/profile"),
        phases=phases_file("nsys", "profile_model", NSYS_JOB),
    log:
        f"{LOGS}/nsys/{{size}}_ctx{{ctx}}_{{precision}}.log",
    benchmark:
        benchmark_file("nsys", "profile_model", NSYS_JOB)
    priority: job_priority("nsys")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=model_code_version("nsys"),
        out_dir=lambda w, output: str(Path(output.profile).parent),
        spec=lambda w: job_spec("nsys", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure nsys --spec {params.spec:q} --out-dir {params.out_dir}"
        " --phases {output.phases} --backend-record {input.backend} > {log} 2>&1"


rule aggregate_nsys:
    input:
        kernels=NSYS_JOBS["kernels.csv"],
        ranges=NSYS_JOBS["ranges.csv"],
        records=NSYS_JOBS["run.json"],
    output:
        kernels=report(
            NSYS_TABLES[0],
            caption="../report/nsys_tables.rst",
            category="Tables",
            labels={"section": "nsys", "table": "kernels"},
        ),
        ranges=report(
            NSYS_TABLES[1],
            caption="../report/nsys_tables.rst",
            category="Tables",
            labels={"section": "nsys", "table": "ranges"},
        ),
        runs=report(
            NSYS_TABLES[2],
            caption="../report/nsys_tables.rst",
            category="Tables",
            labels={"section": "nsys", "table": "runs"},
        ),
    log:
        f"{LOGS}/nsys/aggregate.log",
    benchmark:
        benchmark_file("nsys", "aggregate_nsys")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("aggregate_nsys"),
    shell:
        "lmstudy_cpu aggregate_nsys --out-dir $(dirname {output.kernels})"
        " --records {input.records} > {log} 2>&1"


if NSYS["enabled"]:
    # (a) sets nsys's forward time beside the timing section's Python timer.
    SECTION_TABLES["nsys"] = (
        NSYS_TABLES + [NSYS_BACKEND] + SECTION_TABLES.get("timing", [])
    )
    count_cost("nsys", "nsys_backend")
    count_cost("nsys", "profile_model", NSYS_JOB, NSYS_CONFIGS, measuring=True)
    count_cost("nsys", "aggregate_nsys")
