"""A damaged result file is named with the way to redo it, never read as a wrong result.

Issue 13, items 4 and 8. The files are the smoke run's own (a real run of the
workflow on the CPU), copied and then damaged as a full disk, a killed copy
or a wrong file would damage them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse import result_files
from lmstudy.atomic import atomic_path, write_text
from lmstudy.errors import UserError

from .conftest import REPO, snakemake

RUN = Path("results/default")
TIMING = RUN / "timing/timing.csv"
RAW = RUN / "timing/raw/tiny_ctx32_fp32_naive.csv"


@pytest.fixture
def finished(smoke_run, tmp_path) -> Path:
    """The finished smoke run, copied with its modification times."""
    return Path(shutil.copytree(smoke_run, tmp_path / "run", symlinks=True))


def damaged_message(path: Path) -> str:
    with pytest.raises(result_files.DamagedResult) as error:
        (result_files.read_json if path.suffix == ".json" else result_files.read_csv)(path)
    message = str(error.value)
    assert "\n" not in message
    assert str(path) in message and f"rm '{path}'" in message
    return message


def test_every_file_of_a_real_run_reads_as_whole(finished):
    files = sorted(p for p in (finished / RUN).rglob("*") if p.suffix in (".csv", ".json"))
    unknown = [p for p in files if result_files.product_of(p) is None]
    assert files and not unknown, unknown
    for path in files:
        (result_files.read_json if path.suffix == ".json" else result_files.read_csv)(path)


def test_a_table_cut_in_half_is_named_with_its_job(finished):
    path = finished / TIMING
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    message = damaged_message(path)
    assert "ends inside a line" in message and "aggregate_timing job" in message


def test_a_job_file_cut_inside_a_number_is_not_read_as_a_shorter_number(finished):
    path = finished / RAW
    text = path.read_text()
    value = re.search(r"\d+\.(\d{3,})", text.splitlines()[-1])
    path.write_text(text[: text.rindex(value.group(0)) + len(value.group(0)) - 2])  # 0.808 -> 0.8
    message = damaged_message(path)
    assert "ends inside a line" in message and "time_model job" in message


def test_a_table_cut_at_a_line_inside_a_job_is_incomplete(finished):
    path = finished / TIMING
    lines = path.read_text().splitlines(keepends=True)
    keys = ["size", "context_length", "precision", "variant"]
    job = pd.read_csv(path)[keys].astype(str).agg("/".join, axis=1)
    inside = next(i for i in range(len(job) // 2, len(job) - 1) if job[i] == job[i + 1])
    path.write_text("".join(lines[: inside + 2]))  # the header and rows 0..inside: whole lines only
    assert "lack" in damaged_message(path)


def test_rows_repeated_by_a_bad_concatenation_are_named(finished):
    path = finished / RAW
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + lines[1:]))
    assert "repeats size tiny" in damaged_message(path)


def test_a_value_that_is_not_a_number_is_named_with_its_row(finished):
    path = finished / RAW
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[2, "median_ms"] = "0.8x"
    frame.to_csv(path, index=False)
    assert "row 4 has '0.8x' for median_ms, not a number" in damaged_message(path)


def test_a_missing_column_is_named(finished):
    path = finished / RUN / "attention/attention.csv"
    pd.read_csv(path).drop(columns=["seq_len"]).to_csv(path, index=False)
    message = damaged_message(path)
    assert "no column seq_len" in message and "aggregate_attention job" in message


@pytest.mark.parametrize(
    "content",
    [b"", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", b"\xff\xfe\xfd\n"],
    ids=["empty", "binary", "not utf-8"],
)
def test_an_empty_or_binary_file_is_named(finished, content):
    path = finished / RUN / "compile/compile.csv"
    path.write_bytes(content)
    assert "aggregate_compile job" in damaged_message(path)


def test_a_job_record_cut_short_is_named(finished):
    path = next((finished / RUN / "nsys/raw").glob("*/*/run.json"))
    path.write_text(path.read_text()[:40])
    assert "profile_model job" in damaged_message(path)


# Through Snakemake: a damaged file stops the job that reads it, with one sentence.
def rerun(workdir: Path) -> str:
    done = snakemake(workdir, "--cores", "1", "--config", "preset=smoke", check=False)
    assert done.returncode != 0, done.stdout[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout + done.stderr


def test_the_report_refuses_a_timing_table_cut_in_half(finished):
    path = finished / TIMING
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    report = finished / "report/default/report.md"
    rendered = report.stat().st_mtime_ns
    out = rerun(finished)
    named = rf"error: {re.escape(str(TIMING))} is damaged .*aggregate_timing job.*rm '{TIMING}'"
    assert re.search(named, out)
    # Nothing was rendered from it: the report is the one of the whole table, or gone.
    assert not report.exists() or report.stat().st_mtime_ns == rendered


def test_aggregation_refuses_a_job_file_cut_inside_a_number(finished):
    path = finished / RAW
    text = path.read_text()
    path.write_text(text[: len(text) - 7])
    out = rerun(finished)
    assert re.search(rf"error: {re.escape(str(RAW))} is damaged .*time_model job.*rm '{RAW}'", out)


# A full disk (/dev/full answers every write with ENOSPC, as a full disk does).
def test_a_full_disk_names_the_file_and_leaves_nothing(tmp_path):
    target = tmp_path / "table.csv"
    named = rf"no space left on the device to write {re.escape(str(target))}: free"
    with pytest.raises(UserError, match=named):
        with atomic_path(target), open("/dev/full", "w") as full:
            full.write("x" * 100_000)
            full.flush()
    assert list(tmp_path.iterdir()) == []
    write_text(target, "ok\n")  # the same write, with space, goes through
    assert target.read_text() == "ok\n"


def test_a_script_on_a_full_disk_says_so_in_one_sentence(tmp_path):
    program = (
        "import sys\n"
        "from lmstudy.cli import run_main\n"
        "def main():\n"
        "    with open('/dev/full', 'w') as f:\n"
        "        f.write('x' * 100_000)\n"
        "run_main(main)\n"
    )
    done = subprocess.run([sys.executable, "-c", program, str(REPO)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("error: there is no space left on the device: free some space")
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_timing_table_with_a_compiled_rung_is_whole(tmp_path):
    """A compiled rung times the training step only (lmstudy.plan): its job is complete with that alone."""
    rows = []
    for ctx, variant, passes in ((512, "naive", ("forward", "forward_backward", "train_step")),
                                 (1024, "naive", ("forward", "forward_backward", "train_step")),
                                 (1024, "sdpa-compile", ("train_step",))):
        for pass_name in passes:
            for warmup in (0, 1, 5):
                rows.append({"size": "2.7B", "context_length": ctx, "pass": pass_name, "precision": "bf16",
                             "variant": variant, "warmup_steps": warmup, "status": "ok", "params": 3,
                             "batch_size": 4, "mean_ms": 10.0, "median_ms": 10.0, "min_ms": 9.0,
                             "max_ms": 11.0, "tokens_per_s": 4 * ctx / 0.010})
    table = tmp_path / "timing" / "timing.csv"
    table.parent.mkdir()
    pd.DataFrame(rows).to_csv(table, index=False)
    assert len(result_files.read_csv(table)) == 21
    # ... and a naive job without its forward rows is still caught
    cut = [r for r in rows if not (r["context_length"] == 1024 and r["pass"] == "forward")]
    pd.DataFrame(cut).to_csv(table, index=False)
    with pytest.raises(result_files.DamagedResult, match="lack pass forward"):
        result_files.read_csv(table)


# Issue 23, item 7: values the producer cannot write are refused by name.
@pytest.mark.parametrize(("edit", "named"), [
    (lambda f: f.assign(median_ms=[float("nan"), *f["median_ms"][1:]]), "row 2 is ok but has nan for median"),
    (lambda f: f.assign(tokens_per_s=[f["tokens_per_s"][0] * 2, *f["tokens_per_s"][1:]]),
     "not its median step's"),
    (lambda f: f.assign(max_ms=[float("inf"), *f["max_ms"][1:]]), "row 2 has inf for max_ms"),
    (lambda f: f.assign(min_ms=[-1.0, *f["min_ms"][1:]]), "row 2 is ok but has -1.0 for min_ms"),
])
def test_a_timing_row_the_producer_cannot_write_is_named(finished, edit, named):
    path = finished / TIMING
    frame = pd.read_csv(path)
    assert frame.loc[0, "status"] == "ok"
    edit(frame).to_csv(path, index=False)
    assert named in damaged_message(path)
