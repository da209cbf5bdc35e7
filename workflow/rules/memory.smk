# Section 4: memory. One GPU job per size x context length x pass x
# precision records a CUDA memory snapshot of one step after warm-up; a
# CPU job summarizes each snapshot; the table gathers the summaries. On a
# CPU there is no caching allocator to record, so no snapshot job runs and
# the table says why.
MEMORY = config["memory"]
MEMORY_CFG = "{size}_ctx{ctx}_{mempass}_{precision}"
MEMORY_RAW = f"{RESULTS}/memory/raw/{MEMORY_CFG}"
MEMORY_SUMMARY = f"{RESULTS}/memory/summary/{MEMORY_CFG}"
MEMORY_ON_GPU = config["device"] == "cuda"
MEMORY_SKIPPED = (
    ""
    if MEMORY_ON_GPU
    else "device is cpu: CUDA memory snapshots record the GPU's caching allocator, "
    "so they run only on a GPU (the analyzer's tests use snapshots captured on one)"
)


MEMORY_CONFIGS = (
    grid(
        size=MEMORY["sizes"],
        ctx=MEMORY["context_lengths"],
        mempass=MEMORY["passes"],
        precision=MEMORY["precisions"],
    )
    if MEMORY_ON_GPU
    else []
)
MEMORY_SUMMARIES = [
    f"{MEMORY_SUMMARY}/summary.json".format(**job) for job in MEMORY_CONFIGS
]
# What the report reads of each summary besides memory.csv: its timeline and
# largest allocations (figures and tables of section 4).
MEMORY_SUMMARY_FILES = [
    f"{MEMORY_SUMMARY}/{name}".format(**job)
    for job in MEMORY_CONFIGS
    for name in ("summary.json", "timeline.csv", "largest_allocations.csv")
]


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    memory_table,


rule memory_snapshot:
    output:
        snapshot=f"{MEMORY_RAW}.pickle",
        meta=f"{MEMORY_RAW}.json",
        phases=phases_file("memory", "memory_snapshot", MEMORY_CFG),
    log:
        f"{LOGS}/memory/{MEMORY_CFG}.log",
    benchmark:
        benchmark_file("memory", "memory_snapshot", MEMORY_CFG)
    wildcard_constraints:
        mempass="forward|train_step",
    priority: job_priority("memory")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=model_code_version("memory"),
        spec=lambda w: job_spec("memory", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure memory --spec {params.spec:q} --out {output.snapshot}"
        " --meta {output.meta} --phases {output.phases} > {log} 2>&1"


rule memory_summary:
    input:
        snapshot=f"{MEMORY_RAW}.pickle",
        meta=f"{MEMORY_RAW}.json",
    output:
        summary=f"{MEMORY_SUMMARY}/summary.json",
        timeline=f"{MEMORY_SUMMARY}/timeline.csv",
        largest=f"{MEMORY_SUMMARY}/largest_allocations.csv",
        kinds=f"{MEMORY_SUMMARY}/kinds.csv",
    log:
        f"{LOGS}/memory/summary_{MEMORY_CFG}.log",
    benchmark:
        benchmark_file("memory", "memory_summary", MEMORY_CFG)
    wildcard_constraints:
        mempass="forward|train_step",
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("memory_summary"),
        out=MEMORY_SUMMARY,
        top=flag("--top", MEMORY["top_allocations"]),
    shell:
        "lmstudy_cpu memory_summary {input.snapshot} --meta {input.meta}"
        " --out {params.out} {params.top} > {log} 2>&1"


rule memory_table:
    input:
        MEMORY_SUMMARIES,
    output:
        report(
            f"{RESULTS}/memory/memory.csv",
            caption="../report/memory_table.rst",
            category="Tables",
            labels={"section": "memory", "table": "all configurations"},
        ),
    log:
        f"{LOGS}/memory/table.log",
    benchmark:
        benchmark_file("memory", "memory_table")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("memory_table"),
        sizes=flag("--sizes", MEMORY["sizes"]),
        context_lengths=flag("--context-lengths", MEMORY["context_lengths"]),
        passes=flag("--passes", MEMORY["passes"]),
        precisions=flag("--precisions", MEMORY["precisions"]),
        skipped=MEMORY_SKIPPED,
    shell:
        "lmstudy_cpu memory_table --out {output}"
        " {params.sizes} {params.context_lengths}"
        " {params.passes} {params.precisions}"
        " --summaries {input} --skipped-reason={params.skipped:q} > {log} 2>&1"


if MEMORY["enabled"]:
    SECTION_TABLES["memory"] = [f"{RESULTS}/memory/memory.csv"] + MEMORY_SUMMARY_FILES
    count_cost("memory", "memory_snapshot", MEMORY_CFG, MEMORY_CONFIGS, measuring=True)
    count_cost("memory", "memory_summary", MEMORY_CFG, MEMORY_CONFIGS)
    count_cost("memory", "memory_table")
