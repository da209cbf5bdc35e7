# Section 6: the whole model under torch.compile. One job per size x
# precision x attention at the section's context length; it measures eager
# then compiled for each pass, the compile time apart. The optimization
# ladder (fp32 -> bf16 -> bf16 + SDPA -> bf16 + SDPA + compile) is read from
# the timing section's table.
COMPILE = config["compile"]
COMPILE_RAW = RESULTS + "/compile/raw/{size}_ctx{ctx}_{precision}_{attention}.csv"


def compile_jobs():
    return expand(
        COMPILE_RAW,
        size=COMPILE["sizes"],
        ctx=COMPILE["context_length"],
        precision=COMPILE["precisions"],
        attention=COMPILE["attention"],
    )


rule compile_model:
    output:
        COMPILE_RAW,
    log:
        LOGS + "/compile/{size}_ctx{ctx}_{precision}_{attention}.log",
    wildcard_constraints:
        attention="naive|sdpa",
    resources:
        gpu=1,
    params:
        dims=lambda w: size_dims(w.size),
        batch_size=config["batch_size"],
        vocab_size=config["vocab_size"],
        passes=COMPILE["passes"],
        warmup_steps=COMPILE["warmup_steps"],
        timed_steps=COMPILE["timed_steps"],
        device=config["device"],
        tf32="--tf32" if config["tf32"] else "",
        memory_cap=optional_flag("--memory-cap-gb", config.get("memory_cap_gb")),
    shell:
        "{PYTHON} {SCRIPTS}/compile_model.py --out {output} --size {wildcards.size}"
        " --d-model {params.dims[d_model]} --d-ff {params.dims[d_ff]}"
        " --num-layers {params.dims[num_layers]} --num-heads {params.dims[num_heads]}"
        " --context-length {wildcards.ctx} --precision {wildcards.precision}"
        " --attention {wildcards.attention} --batch-size {params.batch_size}"
        " --vocab-size {params.vocab_size} --passes {params.passes}"
        " --warmup-steps {params.warmup_steps} --timed-steps {params.timed_steps}"
        " --device {params.device} {params.tf32} {params.memory_cap} > {log} 2>&1"


rule aggregate_compile:
    input:
        compile_jobs(),
    output:
        RESULTS + "/compile/compile.csv",
    log:
        LOGS + "/compile/aggregate.log",
    shell:
        "{PYTHON} {SCRIPTS}/aggregate.py --out {output} {input} > {log} 2>&1"


if COMPILE["enabled"]:
    SECTION_TABLES["compile"] = [RESULTS + "/compile/compile.csv"]
# The ladder needs the timing rows with bf16 and the sdpa / sdpa-compile variants.
if COMPILE["enabled"] and config["timing"]["enabled"]:
    SECTION_TABLES["ladder"] = [RESULTS + "/timing/timing.csv"]
