# Section 7: the optimization ladder of the training step. One job per size x
# rung at the section's context length (each a fresh process: an OOM rung
# leaves nothing behind for the next), one job for the dense bf16 matmul
# rate the rungs are a share of, and one that joins them. The code is
# lmstudy.measure.ladder_bench's, which scripts/bench_ladder.py runs by hand.
LADDER = config["ladder"]
LADDER_JOB = "{size}_ctx{ctx}_{rung}"
LADDER_RAW = f"{RESULTS}/ladder/raw/{LADDER_JOB}.csv"
# Sizes outer, rungs in the config's order inner: the joined table's order.
LADDER_CONFIGS = grid(
    size=LADDER["sizes"], ctx=LADDER["context_length"], rung=LADDER["rungs"]
)
LADDER_JOBS = [LADDER_RAW.format(**job) for job in LADDER_CONFIGS]
MATMUL = LADDER["matmul"]


rule ladder_rung:
    output:
        rows=LADDER_RAW,
        phases=phases_file("ladder", "ladder_rung", LADDER_JOB),
    log:
        f"{LOGS}/ladder/{{size}}_ctx{{ctx}}_{{rung}}.log",
    benchmark:
        benchmark_file("ladder", "ladder_rung", LADDER_JOB)
    wildcard_constraints:
        rung=alternatives(RUNG_KEYS),
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=code_version("ladder_rung"),
        dims=lambda w: size_dims(w.size),
        batch_size=flag("--batch-size", config["batch_size"]),
        vocab_size=flag("--vocab-size", config["vocab_size"]),
        warmup_steps=flag("--warmup-steps", LADDER["warmup_steps"]),
        timed_steps=flag("--timed-steps", LADDER["timed_steps"]),
        profile_steps=flag("--profile-steps", LADDER["profile_steps"]),
        device=flag("--device", config["device"]),
        tf32="--tf32" if config["tf32"] else "",
        memory_cap=flag("--memory-cap-gb", config.get("memory_cap_gb")),
    shell:
        "lmstudy_gpu ladder_rung --out {output.rows} --phases {output.phases}"
        " --size {wildcards.size} --rung {wildcards.rung}"
        " --d-model {params.dims[d_model]} --d-ff {params.dims[d_ff]}"
        " --num-layers {params.dims[num_layers]} --num-heads {params.dims[num_heads]}"
        " --context-length {wildcards.ctx} {params.batch_size} {params.vocab_size}"
        " {params.warmup_steps} {params.timed_steps} {params.profile_steps}"
        " {params.device} {params.tf32} {params.memory_cap} > {log} 2>&1"


rule matmul_reference:
    output:
        rows=f"{RESULTS}/ladder/matmul.csv",
        phases=phases_file("ladder", "matmul_reference"),
    log:
        f"{LOGS}/ladder/matmul_reference.log",
    benchmark:
        benchmark_file("ladder", "matmul_reference")
    conda:
        LMSTUDY_ENV
    resources:
        **gpu_job_resources(),
    params:
        code=code_version("matmul_reference"),
        n=flag("--n", MATMUL["n"]),
        burst_repeats=flag("--burst-repeats", MATMUL["burst_repeats"]),
        sustained_repeats=flag("--sustained-repeats", MATMUL["sustained_repeats"]),
        device=flag("--device", config["device"]),
    shell:
        "lmstudy_gpu matmul_reference --out {output.rows} --phases {output.phases}"
        " {params.n} {params.burst_repeats} {params.sustained_repeats}"
        " {params.device} > {log} 2>&1"


rule aggregate_ladder:
    input:
        matmul=f"{RESULTS}/ladder/matmul.csv",
        rungs=LADDER_JOBS,
    output:
        report(
            f"{RESULTS}/ladder/ladder.csv",
            caption="../report/ladder_table.rst",
            category="Tables",
            labels={"section": "ladder", "table": "all rungs"},
        ),
    log:
        f"{LOGS}/ladder/aggregate.log",
    benchmark:
        benchmark_file("ladder", "aggregate_ladder")
    conda:
        LMSTUDY_ENV
    params:
        code=code_version("ladder_table"),
    shell:
        "lmstudy ladder_table --out {output} --matmul {input.matmul} {input.rungs} > {log} 2>&1"


if LADDER["enabled"]:
    # The section reads the joined table, and the matmul runs for their clocks.
    SECTION_TABLES["ladder"] = [
        f"{RESULTS}/ladder/ladder.csv",
        f"{RESULTS}/ladder/matmul.csv",
    ]
    count_cost("ladder", "ladder_rung", LADDER_JOB, LADDER_CONFIGS, measuring=True)
    count_cost("ladder", "matmul_reference", measuring=True)
    count_cost("ladder", "aggregate_ladder")
