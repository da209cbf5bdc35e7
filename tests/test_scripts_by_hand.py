"""Every program runs by hand: it answers --help, says a user's mistake in one line, and a long one
says what it is doing as it goes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO
from .specs import spec_fields

PROGRAMS = sorted([*(REPO / "scripts").glob("*.py"), *(REPO / "tools").glob("*.py")])
NO_CUDA_HERE = shutil.which("nvidia-smi") is None and not Path("/proc/driver/nvidia").exists()
TINY = ["--d-model", "32", "--d-ff", "64", "--num-layers", "1", "--num-heads", "2", "--context-length", "16"]
# The same model as a job spec's keys (lmstudy.job_spec); the rest of a spec comes from config.yaml.
TINY_SPEC = {"d_model": 32, "d_ff": 64, "num_layers": 1, "num_heads": 2, "context_length": 16}


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          **kwargs)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_program_answers_help(program):
    done = run(program, "--help", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {program.name}"), done.stdout[:300]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", __import__("lmstudy.entry").entry.COMMANDS)
def test_every_cpu_command_answers_help(command):
    done = run("-m", "lmstudy", command, "--help", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m lmstudy {command}"), done.stdout[:300]


def test_the_study_command_lists_the_cpu_commands():
    from lmstudy.entry import COMMANDS

    done = run("-m", "lmstudy", "--help", timeout=120)
    assert done.returncode == 0 and "measure" in done.stdout, done.stderr
    assert all(name in done.stdout for name in COMMANDS)


def test_the_lease_wrapper_names_a_command_it_cannot_start_in_one_line(tmp_path):
    done = run(REPO / "scripts/gpu_lease.py", "--", "no-such-program-here",
               env={"PATH": "/usr/bin:/bin", "LMSTUDY_GPUS": "", "LMSTUDY_GPU_LEASE_DIR": str(tmp_path)})
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "no-such-program-here" in done.stderr, done.stderr


def complete(job: str, **settings) -> str:
    """A complete spec of `job`: the smoke preset's with `settings` over it, as `lmstudy spec` makes."""
    return json.dumps(spec_fields(job, **settings))


# A GPU measurement run by hand on a machine without CUDA: the reason in one line, exit 2.
GPU_RUNS = {
    "measure timing": lambda: ["--out", "{tmp}/t.csv", "--spec", complete(
        "timing", size="s", **TINY_SPEC, precision="fp32", variant="naive", device="cuda")],
    "measure ladder": lambda: ["--out", "{tmp}/r.csv", "--matmul-out", "{tmp}/m.csv", "--spec", complete(
        "ladder", size="s", **TINY_SPEC, rung="bf16", device="cuda")],
    "measure attention": lambda: ["--out", "{tmp}/a.csv", "--spec", complete(
        "attention", implementation="sdpa", precision="fp32", head_dim=8, seq_lens=[16], device="cuda")],
    "matmul_reference": lambda: ["--out", "{tmp}/m.csv", "--n", "64"],
    "bench_harness": lambda: ["--size-dims", "32", "64", "1", "2", "--context-length", "16"],
    "bench_ladder": lambda: ["--out", "{tmp}/b.csv", *TINY],
}


def program(name: str) -> list:
    """scripts/<name>.py, or the study's command for "measure <job>"."""
    if name.startswith("measure "):
        return ["-m", "lmstudy", *name.split()]
    return [REPO / "scripts" / f"{name}.py"]


@pytest.mark.skipif(not NO_CUDA_HERE, reason="this machine has an NVIDIA driver")
@pytest.mark.parametrize("script", sorted(GPU_RUNS))
def test_a_gpu_script_on_a_cpu_says_so_in_one_line(script, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in GPU_RUNS[script]()]
    done = run(*program(script), *args, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("error: CUDA is not available"), done.stderr[-3000:]
    assert '"device": "cpu"' in said[0] and "--device cpu" in said[0] and "preset=smoke" in said[0]


def test_bench_ladder_says_each_rung_as_it_goes(tmp_path):
    out = tmp_path / "ladder.csv"
    command = [sys.executable, "scripts/bench_ladder.py", "--out", str(out), *TINY, "--device", "cpu",
               "--rungs", "fp32", "bf16", "--warmup-steps", "1", "--timed-steps", "2",
               "--profile-steps", "0", "--matmul-n", "64", "--matmul-bursts", "2"]
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        first = process.stdout.readline()
        while first and not first.startswith("rung 1/2: fp32"):
            first = process.stdout.readline()
        # The first rung is announced while the program still has the second to run.
        still_running = process.poll() is None
        rest = process.stdout.read()
        assert process.wait() == 0, process.stderr.read()
    assert first.startswith("rung 1/2: fp32") and still_running
    assert "rung 2/2: bf16" in rest and out.exists()


@pytest.mark.parametrize(("spec", "named"), [
    ('{"size": "tiny", "precision": "fp32", "variant": "naive"}', "the spec lacks"),
    ("no-such-spec.json", "neither a JSON object nor a readable file"),
    ("extra", "the spec of job timing has no key warmup; did you mean warmup_steps?"),
])
def test_a_wrong_spec_by_hand_is_named_in_one_line(spec, named, tmp_path):
    if spec == "extra":
        spec = json.dumps({**spec_fields("timing"), "warmup": 1})
    done = run(*program("measure timing"), "--out", tmp_path / "t.csv", "--spec", spec, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and named in said[0], done.stderr[-3000:]
    assert not (tmp_path / "t.csv").exists()


def test_a_partial_spec_is_completed_by_the_spec_command_only(tmp_path):
    """A job takes its spec as given (its missing keys named, with the command that completes it);
    `lmstudy spec` completes it from the config file named, as the workflow builds the job's spec."""
    partial = {"size": "tiny", "context_length": 32, "precision": "fp32", "variant": "naive"}
    done = run(*program("measure timing"), "--out", tmp_path / "t.csv", "--spec", json.dumps(partial))
    assert done.returncode == 2 and "lmstudy spec timing" in done.stderr, done.stderr[-3000:]
    done = run("-m", "lmstudy", "spec", "timing", "size=tiny", "context_length=32", "precision=fp32",
               "variant=naive", "timed_steps=4", "--preset", "smoke", "--configfile", REPO / "config.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {**spec_fields("timing", **partial), "timed_steps": 4}
    done = run("-m", "lmstudy", "spec", "timing", "size", "--configfile", REPO / "config.yaml")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "KEY=VALUE" in done.stderr


AUDIT_OPENS = """
import json, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
from lmstudy.command import main
main(sys.argv[1:])
print(json.dumps([p for p in opened if p.endswith((".yaml", ".yml"))]))
"""


def test_a_job_reads_nothing_but_its_spec(tmp_path):
    """No config.yaml: a measuring job's settings are its spec, as the workflow passes it. The one
    YAML file it reads is the config's schema: the rules its spec's values are checked against
    (lmstudy.job_spec.check_spec), no setting."""
    spec = complete("norms")
    (tmp_path / "config.yaml").write_text("this: [is not the study's config\n")
    done = subprocess.run([sys.executable, "-c", AUDIT_OPENS, "measure", "norms", "--spec", spec,
                           "--out", str(tmp_path / "n.csv")], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    schema = REPO / "workflow/schemas/config.schema.yaml"
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [str(schema)]
    assert (tmp_path / "n.csv").stat().st_size > 0


# Issue 32, item 9: a damaged backend record is named as damaged, as a damaged CSV is.
@pytest.mark.parametrize("content", ['{"backend": "nsys", "requ', "[1, 2]\n", '{"backend": "nsys"}\n'],
                         ids=["cut short", "not an object", "no requested"])
def test_a_damaged_nsys_backend_record_is_named_in_one_sentence(tmp_path, content):
    record = tmp_path / "results/r/nsys/backend.json"
    record.parent.mkdir(parents=True)
    record.write_text(content)
    spec = complete("nsys", size="s", **TINY_SPEC, precision="fp32")
    done = run(*program("measure nsys"), "--spec", spec, "--out-dir", tmp_path / "o",
               "--backend-record", record, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{record} is damaged" in lines[0]
    assert "the nsys_backend job writes it" in lines[0]
    assert not (tmp_path / "o").exists()


# Issue 32, item 15: the browser check on a machine without Chromium says so in one line.
def test_the_browser_check_without_chromium_says_so_in_one_line(tmp_path):
    page = tmp_path / "index.html"
    page.write_text("<html></html>")
    done = run(REPO / "tools/report_browser.py", page, env={"PATH": str(tmp_path)}, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no Chromium found") and "make browser" in lines[0]


# Issue 32, item 15: `make test` says why it skipped each skipped test.
def test_make_test_reports_the_reason_of_each_skipped_test():
    done = subprocess.run(["make", "-n", "test", "VENV=/nonexistent-venv"], capture_output=True, text=True,
                          cwd=REPO)
    pytest_line = next(line for line in done.stdout.splitlines() if "-m pytest" in line and " tests" in line)
    assert " -rs " in f" {pytest_line} ", pytest_line
