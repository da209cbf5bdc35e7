# Section 5: attention alone. One job per implementation x precision x head
# size; it sweeps the sequence lengths in one process, smallest first, and
# records out-of-memory as a result row.
ATTENTION = config["attention"]
ATTENTION_RAW = RESULTS + "/attention/raw/{impl}_{precision}_d{head_dim}.csv"


def attention_jobs():
    return expand(
        ATTENTION_RAW,
        impl=ATTENTION["implementations"],
        precision=ATTENTION["precisions"],
        head_dim=ATTENTION["head_dims"],
    )


rule attention_sweep:
    output:
        ATTENTION_RAW,
    log:
        LOGS + "/attention/{impl}_{precision}_d{head_dim}.log",
    wildcard_constraints:
        impl="naive|naive-compile|sdpa",
        head_dim=r"\d+",
    resources:
        gpu=1,
    params:
        seq_lens=ATTENTION["seq_lens"],
        batch_size=ATTENTION["batch_size"],
        steps=ATTENTION["steps"],
        warmup=ATTENTION["warmup"],
        device=config["device"],
        tf32="--tf32" if config["tf32"] else "",
        memory_cap=optional_flag("--memory-cap-gb", config.get("memory_cap_gb")),
    shell:
        "{PYTHON} {SCRIPTS}/attention_sweep.py --out {output}"
        " --implementation {wildcards.impl} --precision {wildcards.precision}"
        " --head-dim {wildcards.head_dim} --seq-lens {params.seq_lens}"
        " --batch-size {params.batch_size} --steps {params.steps} --warmup {params.warmup}"
        " --device {params.device} {params.tf32} {params.memory_cap} > {log} 2>&1"


rule aggregate_attention:
    input:
        attention_jobs(),
    output:
        RESULTS + "/attention/attention.csv",
    log:
        LOGS + "/attention/aggregate.log",
    shell:
        "{PYTHON} {SCRIPTS}/aggregate.py --out {output} {input} > {log} 2>&1"


if ATTENTION["enabled"]:
    SECTION_TABLES["attention"] = [RESULTS + "/attention/attention.csv"]
