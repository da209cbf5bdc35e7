# Section 7: the optimization ladder of the training step. One job per size x
# rung at the section's context length (each a fresh process: an OOM rung
# leaves nothing behind for the next), and one that joins them. Each rung job
# also measures the dense bf16 matmul ceiling of its own GPU right after the
# rung, in the same process: which GPU a job gets is known only when it
# leases one (never at parse time), and ceilings differ by a few percent
# between GPUs of a model, so each rung is a share of its own GPU's ceiling.
# The code is lmstudy.measure.ladder_bench's, which scripts/bench_ladder.py
# runs by hand.
LADDER = config["ladder"]
LADDER_JOB = "{size}_ctx{ctx}_{rung}"
LADDER_RAW = f"{RESULTS}/ladder/raw/{LADDER_JOB}.csv"
LADDER_MATMUL = f"{RESULTS}/ladder/raw_matmul/{LADDER_JOB}.csv"
# Sizes outer, rungs in the config's order inner: the joined table's order.
LADDER_CONFIGS = grid(
    size=LADDER["sizes"], ctx=LADDER["context_length"], rung=LADDER["rungs"]
)
LADDER_JOBS = [LADDER_RAW.format(**job) for job in LADDER_CONFIGS]
LADDER_MATMULS = [LADDER_MATMUL.format(**job) for job in LADDER_CONFIGS]


# Cheap joins of finished results: run where Snakemake runs, never sent to a cluster.
localrules:
    aggregate_ladder,


rule ladder_rung:
    output:
        rows=LADDER_RAW,
        matmul=LADDER_MATMUL,
        phases=phases_file("ladder", "ladder_rung", LADDER_JOB),
    log:
        f"{LOGS}/ladder/{{size}}_ctx{{ctx}}_{{rung}}.log",
    benchmark:
        benchmark_file("ladder", "ladder_rung", LADDER_JOB)
    wildcard_constraints:
        rung=alternatives(RUNG_KEYS),
    priority: job_priority("ladder")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=model_code_version("ladder"),
        spec=lambda w: job_spec("ladder", w),
    shell:
        "LMSTUDY_RUNTIME_MIN={resources.runtime} lmstudy_gpu measure ladder --spec {params.spec:q} --out {output.rows}"
        " --matmul-out {output.matmul} --phases {output.phases} > {log} 2>&1"


rule aggregate_ladder:
    input:
        matmul=LADDER_MATMULS,
        rungs=LADDER_JOBS,
    output:
        table=report(
            f"{RESULTS}/ladder/ladder.csv",
            caption="../report/ladder_table.rst",
            category="Tables",
            labels={"section": "ladder", "table": "all rungs"},
        ),
        matmul=f"{RESULTS}/ladder/matmul.csv",
    log:
        f"{LOGS}/ladder/aggregate.log",
    benchmark:
        benchmark_file("ladder", "aggregate_ladder")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("ladder_table"),
        min_gpu_busy=flag("--min-gpu-busy", config["noise"]["min_gpu_busy"]),
        max_spread=flag("--max-spread", config["noise"]["max_spread"]),
    shell:
        "lmstudy_cpu ladder_table --out {output.table} --matmul-out {output.matmul}"
        " {params.min_gpu_busy} {params.max_spread}"
        " --matmul {input.matmul} --rungs {input.rungs} > {log} 2>&1"


if LADDER["enabled"]:
    # The section reads the joined table, and the matmul bursts of every rung job for their clocks.
    SECTION_TABLES["ladder"] = [
        f"{RESULTS}/ladder/ladder.csv",
        f"{RESULTS}/ladder/matmul.csv",
    ]
    count_cost("ladder", "ladder_rung", LADDER_JOB, LADDER_CONFIGS, measuring=True)
    count_cost("ladder", "aggregate_ladder")
