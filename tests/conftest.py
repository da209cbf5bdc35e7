"""Shared fixtures: the smoke workflow, run once per test session."""

from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]

# This checkout's lmstudy, in this process (pyproject's pythonpath) and in every program a test
# starts, whatever else is installed.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
from lmstudy.cli import own_torch_scratch  # noqa: E402

# Tests that build an optimizer or compile in this process import torch._dynamo, which would
# leave <tmp>/torchinductor_<user> behind (157 MB after a session): this process's own folder
# instead, removed when the session ends. Snakemake runs do not inherit it (snakemake()): a
# run makes its own, as a user's does, and tests/test_workflow_smoke.py sees what it leaves.
_TORCH_SCRATCH = {"TORCHINDUCTOR_CACHE_DIR": own_torch_scratch()}
_TORCH_SCRATCH["TRITON_CACHE_DIR"] = os.environ["TRITON_CACHE_DIR"]


def pytest_configure(config):
    """This process runs models (unit tests) and also forks measuring processes from itself (jobs run
    in-process, as nsys's torch backend's capture). A child forked after OpenMP started its thread
    pool here hangs in its first parallel operator (libgomp's pool does not survive a fork; CI lost
    its 90 minutes to one). With one thread this process never starts the pool, so the order of the
    tests cannot decide whether a fork is safe. `lmstudy measure` never computes before it forks."""
    import torch

    torch.set_num_threads(1)


def pytest_collection_modifyitems(items):
    """Every test that reads the session's smoke run, directly or through a fixture built on it, is
    marked `workflow` (pyproject.toml): the unit loop, `pytest -m "not workflow"`, never starts it.
    Tests that start Snakemake on the workflow themselves (a run of jobs, or a dry run) carry the mark
    in their own file; one that does not is refused here, named (starts_snakemake)."""
    for item in items:
        if "smoke_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.workflow)
    unmarked = [i.nodeid for i in items if starts_snakemake(i) and not i.get_closest_marker("workflow")]
    if unmarked:
        raise pytest.UsageError(
            f"{len(unmarked)} test(s) start Snakemake without the workflow mark: {', '.join(unmarked)}; "
            "mark each with @pytest.mark.workflow (or its module with pytestmark = pytest.mark.workflow)."
        )


# The names through which a test starts Snakemake on the workflow: snakemake() below, or its command.
_STARTS = {"snakemake", "SNAKEMAKE"}


@functools.cache
def _starting_functions(path: str) -> frozenset[str]:
    """The functions of a test module that start Snakemake, directly or through others of the module
    (a helper, a fixture): each names snakemake() or SNAKEMAKE, or one of those functions."""
    tree = ast.parse(Path(path).read_text())
    names = {
        node.name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    starting = {name for name, used in names.items() if used & _STARTS}
    while True:
        more = {name for name, used in names.items() if used & starting} - starting
        if not more:
            return frozenset(starting)
        starting |= more


def starts_snakemake(item) -> bool:
    """Whether test `item` starts Snakemake: its function, or a fixture of its own module, does."""
    function = getattr(item, "function", None)
    path = getattr(getattr(item, "module", None), "__file__", None)
    if function is None or path is None or Path(path).name == "conftest.py":
        return False
    starting = _starting_functions(path)
    return function.__name__ in starting or bool(starting & set(getattr(item, "fixturenames", ())))


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_of_this_process(tmp_path_factory):
    """pytest's folders where $TMPDIR says; this process's other temporary files with its torch
    scratch folder, removed at exit: inductor puts precompiled headers under tempfile.gettempdir(),
    whatever TORCHINDUCTOR_CACHE_DIR says. Subprocesses keep $TMPDIR (only this process changes)."""
    tmp_path_factory.getbasetemp()  # settled now, before tempfile's folder moves
    tempfile.tempdir = _TORCH_SCRATCH["TORCHINDUCTOR_CACHE_DIR"]
    yield


@pytest.fixture(autouse=True)
def _not_a_forking_parent():
    """A test that runs a script's top level here (tests/test_compile.py's _load_script) marks this
    process as one that forks measuring processes; the next test starts unmarked, as a process does."""
    yield
    from lmstudy.measure import fresh_process

    fresh_process.become_measuring_process()


def snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run Snakemake on this repository's workflow in `workdir` (with `env` added to the environment)."""
    inherited = {k: v for k, v in os.environ.items() if _TORCH_SCRATCH.get(k) != v}
    if env and "LMSTUDY_GPUS" in env:  # pretended GPUs (lease_env): none of this machine's GPU state
        inherited = {k: v for k, v in inherited.items() if not _machine_gpu_state(k)}
    done = subprocess.run(
        [*SNAKEMAKE, "-d", str(workdir), *args],
        capture_output=True, text=True, cwd=workdir,
        env={**inherited, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        )
    return done


def new_workdir(tmp: Path) -> Path:
    """A working directory with its own copy of config.yaml, as a user has."""
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "config.yaml", tmp / "config.yaml")
    return tmp


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """A complete smoke-preset run of the whole workflow on the CPU.

    Every Python process of it notes whether it imported torch, in
    <workdir>/import_probe/ (tests/import_probe/sitecustomize.py).
    """
    workdir = new_workdir(tmp_path_factory.mktemp("smoke"))
    (workdir / IMPORT_PROBE).mkdir()
    probe = import_probe_env(workdir / IMPORT_PROBE)
    # Its own temporary folder and job servers, to see what the run leaves behind
    # (tests/test_workflow_smoke.py); servers idle for 15 s exit, so the test need not wait long.
    smoke_tmp(workdir).mkdir()
    private = {"TMPDIR": str(smoke_tmp(workdir)), "LMSTUDY_JOB_SERVER_DIR": str(smoke_servers(workdir)),
               "LMSTUDY_JOB_SERVER_IDLE_S": "15"}
    snakemake(workdir, "--cores", "2", "--config", "preset=smoke", env={**probe, **private})
    return workdir


def smoke_tmp(workdir: Path) -> Path:
    """The smoke run's $TMPDIR."""
    return workdir.parent / f"{workdir.name}-tmp"


def smoke_servers(workdir: Path) -> Path:
    """The folder of the smoke run's job servers."""
    return workdir.parent / f"{workdir.name}-servers"


IMPORT_PROBE = "import_probe"


def import_probe_env(folder: Path) -> dict:
    """The environment under which every Python process writes into `folder` whether it imported torch."""
    paths = (str(REPO / "tests" / "import_probe"), os.environ.get("PYTHONPATH"))
    path = os.pathsep.join(p for p in paths if p)
    return {"PYTHONPATH": path, "LMSTUDY_IMPORT_PROBE": str(folder)}


def timing_job(spec) -> list[dict]:
    """lmstudy.measure.timing.run_job(spec) in a process of its own, as lmstudy measure timing runs it.

    The job forks one fresh process per pass; a process that already ran
    CPU work in parallel (this test session has) cannot fork safely, since
    OpenMP's thread pool does not survive a fork.
    """
    import dataclasses
    import json

    code = (
        "import json, sys\n"
        "from lmstudy.measure.spec import from_fields\n"
        "from lmstudy.measure.timing import TimingSpec, run_job\n"
        "print(json.dumps(run_job(from_fields(TimingSpec, json.loads(sys.argv[1]))), default=str))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(dataclasses.asdict(spec))],
        capture_output=True, text=True, cwd=REPO, check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"the timing job failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def path_without_nvidia_smi() -> str:
    """PATH less any folder with an nvidia-smi: the fake GPUs must not be mapped to a real machine's."""
    return os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvidia-smi").exists()
    )


def job_spans(results: Path):
    """The measuring jobs' cost rows (where and when they held a GPU) of one run's results (a DataFrame)."""
    from lmstudy.analyse import study_cost

    phases = sorted(results.glob("benchmarks/*/*/*.phases.json"))
    benchmarks = [p.with_name(p.name.removesuffix(".phases.json") + ".tsv") for p in phases]
    return study_cost.job_table(benchmarks, phases).assign(run=results.name)


def lease_env(tmp_path: Path, gpus: str) -> dict[str, str]:
    """The environment of a run whose GPU jobs lease `gpus` (pretended: "0,1"), leases under tmp_path."""
    env = {k: v for k, v in os.environ.items() if not _machine_gpu_state(k)}
    return {**env, "LMSTUDY_GPUS": gpus, "LMSTUDY_GPU_LEASE_DIR": str(tmp_path / "leases"),
            "PATH": path_without_nvidia_smi()}


def _machine_gpu_state(variable: str) -> bool:
    """Whether an environment variable tells which GPUs this machine or its allocation gives."""
    return variable.startswith(("LMSTUDY_GPU", "SLURM_")) or variable == "CUDA_VISIBLE_DEVICES"


# The rules whose jobs measure and so ask for a GPU (the lease, or --gpus on SLURM); the distributed
# sections' ask for one per process on a GPU run and one on a CPU run (the smoke preset's), so that
# they take turns with every other measuring job.
GPU_RULES = frozenset({"time_model", "profile_model", "nsys_backend", "attention_sweep", "compile_model",
                       "precision_experiments", "precision_norms", "ladder_rung", "allreduce", "train_ddp",
                       "shard_optimizer"})
