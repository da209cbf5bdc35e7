# Config helpers and target lists. Parse time imports no torch and touches
# no GPU: on a cluster the DAG is built on a submit host without one.
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.common.configfile import load_configfile
from snakemake.settings.types import DeploymentMethod

# Snakemake puts the Snakefile's folder first on sys.path: this checkout's lmstudy.
from lmstudy import code_version as code_version_of
from lmstudy import config as study_config
from lmstudy import job_spec as job_specs
from lmstudy import plan
from lmstudy import resources as job_resources
from lmstudy import schedule
from lmstudy.ladder_rungs import RUNGS as LADDER_RUNGS
from lmstudy.registry import NAMES as SECTION_NAMES

# config.yaml < preset < --configfile < --config: Snakemake merged the
# command line's layers over config.yaml already; they are laid over the
# preset again, so that what a user types for a run wins over the preset.
# Without config.yaml in the working directory Snakemake takes the first
# --configfile in its place: that one is the study's base, under the preset.
CONFIGFILES = list(workflow.config_settings.configfiles)
OWN_CONFIGFILE_READ = len(workflow.configfiles) > len(CONFIGFILES)
try:
    for configfile_path in workflow.configfiles:
        study_config.check_unique_keys(configfile_path)
    config = study_config.load(
        config,
        Path(workflow.basedir) / "workflow/schemas/config.schema.yaml",
        overrides=[
            *(
                load_configfile(f)
                for f in (CONFIGFILES if OWN_CONFIGFILE_READ else CONFIGFILES[1:])
            ),
            study_config.typed_command_line(workflow.config_settings.config),
        ],
    )
except study_config.ConfigError as error:
    raise WorkflowError(str(error)) from None

# Absolute, so the workflow also runs with --directory elsewhere (the tests do).
BASE = Path(workflow.basedir)
SCRIPTS = BASE / "scripts"
COMMANDS = BASE / "lmstudy" / "commands"
# CPU jobs run `python -m lmstudy <name>` (lmstudy/commands/<name>.py) through the shell
# function `lmstudy_cpu <name> ARGS`
# (a fork of a server that imported pandas and matplotlib: lmstudy.launch.job_server),
# with the Python that runs Snakemake (the project's environment), or the
# rule's conda environment's under --software-deployment-method conda. A
# function, because `snakemake --lint` wants commands to use only the rule's
# own input, output and params, and as params these absolute paths would
# rerun every job whenever the checkout or the environment moves.
PYTHON = (
    "python"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else sys.executable
)
# Measuring jobs run `lmstudy_gpu measure <job> ARGS`: the study's command
# (python -m lmstudy: lmstudy.command) holding an exclusive lease on one GPU of the
# machine for its whole life, shared by every run on it (lmstudy.launch.gpu_lease;
# on SLURM the scheduler's GPU as it is). Every job imports this checkout's lmstudy
# (PYTHONPATH), whatever is installed.
# (Braces doubled: Snakemake formats the prefix like a command.)
# The job's wrapper stops it when this Snakemake process dies, and at its time limit, which
# each GPU rule's command passes as LMSTUDY_RUNTIME_MIN (lmstudy.launch.watch).
shell.prefix(
    "set -euo pipefail; export LMSTUDY_WORKFLOW_PID=$PPID; "
    "export PYTHONPATH=%(base)s${{PYTHONPATH:+:$PYTHONPATH}}; "
    'lmstudy_cpu() {{ %(py)s %(scripts)s/run_script.py -m lmstudy "$@"; }}; '
    "lmstudy_gpu() {{ LMSTUDY_DEVICE=%(device)s %(py)s %(scripts)s/gpu_lease.py"
    ' -- %(py)s -m lmstudy "$@"; }}; '
    % {
        "py": shlex.quote(PYTHON),
        "base": shlex.quote(str(BASE)),
        "scripts": shlex.quote(str(SCRIPTS)),
        "device": shlex.quote(config["device"]),
    }
)
# The software every job needs, for each rule's conda directive; relative to
# workflow/rules/, where the rule files are.
LMSTUDY_ENV = "../envs/lmstudy.yaml"
RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"logs/{RUN}"
# section name -> its aggregated tables; filled by each section's rule file,
# read by report.smk.
SECTION_TABLES = {}
# The study's own cost (the cost section): every job's Snakemake benchmark (its wall
# time) and, for the jobs that measure on the device, the record of its
# phases; filled through count_cost() by each section's rule file.
BENCHMARKS = f"{RESULTS}/benchmarks"
COST_RECORDS = {"benchmarks": [], "phases": []}


def benchmark_file(section, rule_name, job="all"):
    """Where Snakemake writes a job's benchmark: {BENCHMARKS}/<section>/<rule>/<job>.tsv"""
    return f"{BENCHMARKS}/{section}/{rule_name}/{job}.tsv"


def phases_file(section, rule_name, job="all"):
    """Where a measuring job writes where its time went (lmstudy.phases)."""
    return f"{BENCHMARKS}/{section}/{rule_name}/{job}.phases.json"


def count_cost(section, rule_name, job="all", jobs=({},), measuring=False):
    """Add the records of `rule_name`'s jobs (wildcard dicts filling `job`) to the cost section."""
    COST_RECORDS["benchmarks"].extend(
        benchmark_file(section, rule_name, job).format(**w) for w in jobs
    )
    if measuring:
        COST_RECORDS["phases"].extend(
            phases_file(section, rule_name, job).format(**w) for w in jobs
        )


def grid(**values):
    """Every combination of the values (a list, or one value), as wildcard dicts."""
    import itertools

    lists = [v if isinstance(v, list) else [v] for v in values.values()]
    return [dict(zip(values, combo)) for combo in itertools.product(*lists)]


def enabled(section):
    return config.get(section, {}).get("enabled", False)


def size_dims(size):
    return config["sizes"][size]


def alternatives(values):
    """A wildcard constraint that accepts exactly these values."""
    import re

    return "|".join(re.escape(str(v)) for v in values)


def profile_number(name, default):
    """A whole number the workflow profile sets under default-resources, or `default`.

    profiles/slurm sets lmstudy_max_mem_mb and lmstudy_max_runtime there: the
    most a job asks the scheduler for.
    """
    defaults = workflow.resource_settings.default_resources
    value = defaults.get(name) if defaults is not None else None
    if value is None or (not value.is_evaluable() and value.value is None):
        return default
    if value.is_evaluable() or not isinstance(value.value, int):
        raise WorkflowError(
            f"default-resources: {name} must be a whole number, not {value.raw!r}: "
            "fix it in the workflow profile (profiles/slurm/config.yaml)."
        )
    return value.value


# Every rung the ladder benchmark defines (torch-free), for the rung wildcard.
RUNG_KEYS = list(LADDER_RUNGS)


# The most host memory (MiB) and time (minutes) a job asks for.
MAX_MEM_MB = profile_number("lmstudy_max_mem_mb", job_resources.MAX_MEM_MB)
MAX_RUNTIME = profile_number("lmstudy_max_runtime", job_resources.MAX_RUNTIME_MIN)
# On SLURM, jobs that use the GPU go to this partition (empty: the
# cluster's default); the others (aggregation, figures, report) take the
# profile's default-resources: the default partition or the CPU partition
# the user names there.
GPU_PARTITION = os.environ.get("LMSTUDY_SLURM_PARTITION", "")


def job_priority(job):
    """A measuring rule's priority: its job's expected seconds (lmstudy.schedule), so that on a node
    of several GPUs the longest jobs start first and the last GPU does not finish alone.
    """
    return lambda wildcards: schedule.priority(
        job, job_specs.job_spec(config, job, wildcards)
    )


def gpu_job_resources(gpus=1):
    """What every GPU job asks for; use as  resources: **gpu_job_resources()

    One GPU (locally --resources gpu=1 serializes the jobs, on SLURM it is
    --gpus=1), or `gpus` (a number, or a function of the wildcards: a job of
    several processes, each on a GPU of its own, leased at once), on the GPU partition, and a time limit and host memory scaled
    by the job's model size and context length (wildcards size and ctx,
    where it has them), capped by the profile (lmstudy.resources.gpu_job).
    """

    def ask(wildcards):
        size = wildcards.get("size")
        if size is None:
            return {
                "runtime": min(job_resources.BASE_RUNTIME_MIN, MAX_RUNTIME),
                "mem_mb": min(job_resources.BASE_MEM_MB, MAX_MEM_MB),
            }
        ctx = wildcards.get("ctx")
        return job_resources.gpu_job(
            size_dims(size),
            config["vocab_size"],
            int(ctx) if ctx else None,
            device=config["device"],
            max_mem_mb=MAX_MEM_MB,
            max_runtime_min=MAX_RUNTIME,
        )

    return {
        "gpu": gpus,
        "slurm_partition": GPU_PARTITION,
        "runtime": lambda w: ask(w)["runtime"],
        "mem_mb": lambda w: ask(w)["mem_mb"],
    }


def group_gpus(world_size, on_gpu=True):
    """The GPUs a job of `world_size` processes asks for: one each on a GPU run, else one (a CPU run's
    jobs take turns as every other job does)."""
    return int(world_size) if on_gpu and config["device"] == "cuda" else 1


def gpus_given():
    """The GPUs this run may use at once (--resources gpu), or None where it sets no limit."""
    given = workflow.resource_settings.resources.get("gpu")
    given = getattr(given, "value", given)
    return given if isinstance(given, int) else None


def fitting_world_sizes(section, world_sizes, on_gpu=True):
    """The numbers of processes of `section` this run can give a GPU each (--resources gpu); those it
    cannot are left out, said in one sentence (on a CPU run, or without a limit, all are kept).
    """
    given = gpus_given()
    if given is None:
        return list(world_sizes)
    kept = [n for n in world_sizes if group_gpus(n, on_gpu) <= given]
    left = [n for n in world_sizes if n not in kept]
    if left:
        print(
            f"{section}: its jobs of {', '.join(map(str, left))} processes are left out: they need one GPU per "
            f"process and this run gives --resources gpu={given} (run with --resources gpu={max(left)} "
            f"on a node with {max(left)} GPUs to measure them).",
            file=sys.stderr,
        )
    return kept


onerror:
    # A submission the scheduler refused (more memory or time than a node or
    # partition allows): name the settings that decide what jobs ask for.
    from lmstudy.resources import refused_submission_hint

    hint = refused_submission_hint(log)
    if hint:
        print(hint, file=sys.stderr)
    # Each failed job's one sentence, again at the end, where a newcomer reads.
    from lmstudy.errors import failed_jobs_sentences

    for sentence in failed_jobs_sentences(log):
        print(f"error: {sentence}", file=sys.stderr)


def code_version(*commands):
    """A param that changes when the code a job runs changes: its commands (lmstudy/commands/<name>.py)
    and the lmstudy modules they import (lmstudy.code_version; comments and docstrings aside), so that
    an edit reruns the results that code makes and nothing else."""
    digest = code_version_of.digest(*(COMMANDS / f"{name}.py" for name in commands))
    return f"code {digest}"


def job_code_version(job, *scripts):
    """code_version of a measuring job (`lmstudy measure <job>`): the command's code, the job's
    runner and what it imports (lmstudy.code_version.job_digest), and any scripts it runs.
    """
    digest = code_version_of.job_digest(
        job, *(SCRIPTS / f"{name}.py" for name in scripts)
    )
    return f"code {digest}"


def model_code_version(job, *scripts):
    """job_code_version of a job that measures the model, and the model factory's code
    (lmstudy.code_version.factory_digest), so that editing the user's model reruns exactly those
    jobs. (The model itself, config model:, travels in each job's spec: lmstudy.job_spec.)
    """
    factory = code_version_of.factory_digest(config["model"]["factory"])
    return f"{job_code_version(job, *scripts)} model {factory}"


def flag(name, value):
    """A command-line flag and its value(s) as one param; "" for None.

    Snakemake compares a job's params as a set of values without their
    names, so two settings that share a value (1 warm-up step, 1 profiled
    step) would hide a change of one to the other. With the flag's name in
    every value, each change reruns the jobs it concerns.
    """
    if value is None:
        return ""
    values = value if isinstance(value, list) else [value]
    return " ".join([name, *(shlex.quote(str(v)) for v in values)])


def job_spec(job, wildcards=None):
    """A measuring job's settings as its one param (lmstudy.job_spec): JSON, which the shell passes
    as --spec. Its keys are in its text, so a change of any setting reruns exactly the jobs it touches.
    """
    return job_specs.as_param(job_specs.job_spec(config, job, wildcards or {}))


def run_tables_digest(name):
    """The digest of run `name`'s tables (lmstudy.analyse.compare.runs), or a WorkflowError naming the fix.

    The sections declare the tables a comparison reads; importing them (pandas,
    matplotlib) costs seconds, so only a comparison's job asks.
    """
    from lmstudy.analyse.compare.runs import fingerprint
    from lmstudy.errors import UserError
    from lmstudy.report.compare import compared_products
    from lmstudy.sections.contracts import contracts

    try:
        # A comparison's run is a folder of results/, named as a config's run may be (not '..', '-x');
        # a name with '_vs_' is said by fingerprint, which sees both readings of the target.
        if name.startswith((".", "-")):
            study_config.check_run_name(name, "report/compare/<A>_vs_<B>: the run")
    except study_config.ConfigError as error:
        raise WorkflowError(str(error)) from None
    try:
        return fingerprint(Path("results"), name, compared_products(contracts()))
    except UserError as error:
        raise WorkflowError(str(error)) from None


wildcard_constraints:
    size=alternatives(config["sizes"]),
    ctx=r"\d+",
    precision="fp32|bf16|fp16",
    variant=alternatives(plan.VARIANTS),


onstart:
    # On SLURM, a job asking for more time than its partition's MaxTime would
    # pend forever (PartitionTimeLimit): stop before the first submission.
    from lmstudy import slurm_limits

    sentence = slurm_limits.before_submission(workflow)
    if sentence:
        raise WorkflowError(sentence)
    # A read-only folder the jobs write into fails each job after Snakemake started it: said first.
    try:
        study_config.check_writable_folders([RESULTS, LOGS, f"report/{RUN}"])
    except study_config.ConfigError as error:
        raise WorkflowError(str(error)) from None
