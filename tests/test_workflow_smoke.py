"""The smoke preset end to end on a CPU; assertions on the rendered report."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pandas as pd
import yaml

from .conftest import REPO, smoke_servers, smoke_tmp, snakemake


def smoke_config() -> dict:
    from lmstudy.config import apply_preset

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["preset"] = "smoke"
    return apply_preset(config)


def test_report_files_and_figures_exist(smoke_run: Path):
    html = (smoke_run / "report/default/index.html").read_text()
    md = (smoke_run / "report/default/report.md").read_text()
    for src in re.findall(r'<img src="([^"]+)"', html):
        assert (smoke_run / "report/default" / src).stat().st_size > 5000, src
    assert re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md), "the Markdown report shows no figure"
    for name in ("latency", "warmup", "speedup"):
        assert (smoke_run / f"report/default/figures/timing_{name}.png").exists()


def test_environment_header_is_recorded(smoke_run: Path):
    md = (smoke_run / "report/default/report.md").read_text()
    for key in ("device", "PyTorch", "Python", "host", "commit", "date", "TF32 in fp32 matrix products"):
        assert re.search(rf"^\| {key} \| \S", md, re.M), key
    assert "cpu" in re.search(r"^\| device \| (.*) \|$", md, re.M).group(1)
    header = md.split("\n## ")[0]
    assert not re.search(r"^\| [a-z]+_[a-z_]+ \|", header, re.M), header  # no raw CSV keys


def test_timing_table_has_a_row_per_configuration(smoke_run: Path):
    config = smoke_config()
    timing = config["timing"]
    table = pd.read_csv(smoke_run / "report/default/tables/timing_step_time.csv")
    expected = {
        (size, ctx, p, precision)
        for size in timing["sizes"] for ctx in timing["context_lengths"]
        for p in ("forward", "forward+backward", "training step") for precision in timing["precisions"]
    }
    got = zip(table["size"], table["context"], table["pass"], table["precision"], strict=True)
    assert set(got) == expected
    ok = table[table["size"] != "oversized"]
    assert (pd.to_numeric(ok["median (ms)"]) > 0).all()
    # every configuration measured in the smoke preset's two fresh processes, with an interval
    assert (ok["processes"] == 2).all() and ok["95% CI (ms)"].str.contains("–").all()


def test_forced_oom_shows_as_oom(smoke_run: Path):
    raw = pd.read_csv(smoke_run / "results/default/timing/timing.csv")
    assert set(raw.loc[raw["size"] == "oversized", "status"]) == {"OOM"}
    assert set(raw.loc[raw["size"] != "oversized", "status"]) == {"ok"}
    md = (smoke_run / "report/default/report.md").read_text()
    assert re.search(r"^\| oversized \| \d+ \| training step \| fp32 \| OOM \|", md, re.M)
    html = (smoke_run / "report/default/index.html").read_text()
    assert re.search(r'<td class="[^"]*\boom\b[^"]*" >OOM</td>', html)
    assert "oversized ran out of memory" in md


def test_findings_are_computed_from_this_run(smoke_run: Path):
    raw = pd.read_csv(smoke_run / "results/default/timing/timing.csv")
    md = (smoke_run / "report/default/report.md").read_text()
    raw = raw[raw["variant"] == "naive"]  # the study's model; the other variants have a table of their own
    steady = raw[(raw["warmup_steps"] == raw["warmup_steps"].max()) & (raw["status"] == "ok")]
    # Only the configurations whose forward and forward+backward rows are neither host-bound nor noisy.
    fb = steady.pivot_table(index=["size", "context_length", "precision"], columns="pass",
                            values=["median_ms", "host_bound", "noisy"])
    flagged = fb["host_bound"][["forward", "forward_backward"]].any(axis=1) | fb["noisy"][
        ["forward", "forward_backward"]].any(axis=1)
    kept = fb["median_ms"][~flagged.astype(bool)]
    if kept.empty:
        assert "The backward pass is not compared with the forward" in md
    else:
        ratios = (kept["forward_backward"] - kept["forward"]) / kept["forward"]
        # One configuration kept (or all printing alike) gives its ratio, not "a median" of one.
        several = f"{ratios.min():.2f}" != f"{ratios.max():.2f}"
        told = f"a median {ratios.median():.2f}×" if several else f"{ratios.median():.2f}×"
        assert f"takes {told} the forward time" in md
        kept_count = f"{len(ratios)} configuration" + ("s" if len(ratios) > 1 else "")
        assert f"over {kept_count} neither host-bound nor noisy" in md


def test_every_finding_links_the_rows_it_was_computed_from(smoke_run: Path):
    report = smoke_run / "report/default"
    html = (report / "index.html").read_text()
    blocks = re.findall(r'<div class="findings">(.*?)</div>', html, re.S)
    items = [item for block in blocks for item in re.findall(r"<li>(.*?)</li>", block, re.S)]
    assert len(items) > 20
    for item in items:
        link = re.search(r'href="(tables/finding_\w+\.csv)" title="computed by (lmstudy\.[\w.]+)"', item)
        assert link, f"a finding without its rows: {item[:120]}"
        rows = pd.read_csv(report / link[1])
        assert len(rows) > 0 and len(rows.columns) > 0, link[1]


def test_every_job_wrote_a_log(smoke_run: Path):
    logs = list((smoke_run / "logs/default").rglob("*.log"))
    raws = list((smoke_run / "results/default/timing/raw").glob("*.csv"))
    assert len(raws) == len([p for p in logs if p.parent.name == "timing" and "aggregate" not in p.name])


def test_each_run_renders_its_report_in_its_own_folder(smoke_run: Path):
    assert (smoke_run / "report/default/index.html").exists()
    assert not (smoke_run / "report/index.html").exists()
    planned = snakemake(smoke_run, "-n", "--config", "preset=smoke", "run=b").stdout
    outputs = set(re.findall(r"^\s+output: (.*)$", planned, re.M))
    written = {path for line in outputs for path in line.split(", ")}
    assert {"report/b/index.html", "report/b/report.md"} <= written
    assert not {p for p in written if p.startswith("report/") and not p.startswith("report/b/")}


def test_results_and_report_are_readable_as_the_umask_allows(smoke_run: Path):
    import os
    import stat

    umask = os.umask(0o022)
    os.umask(umask)
    files = [p for top in ("results", "report") for p in (smoke_run / top).rglob("*") if p.is_file()]
    assert len(files) > 50
    modes = {p.relative_to(smoke_run): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert {path: mode for path, mode in modes.items() if mode != oct(0o666 & ~umask)} == {}


def test_every_file_the_run_wrote_is_declared(smoke_run: Path):
    """Snakemake knows every file a rule writes or reads: none under results/ or report/ is untracked,
    but what lies inside a folder a rule declares as its output (directory()) and the benchmark records."""
    done = snakemake(smoke_run, "--list-untracked", "--config", "preset=smoke")
    declared_folders = re.compile(
        r"^(results/default/figures/[^/]+/|results/default/nsys/raw/[^/]+/profile/"
        r"|report/default/figures/|report/default/tables/|results/default/benchmarks/)"
    )
    untracked = [
        line for line in (done.stdout + done.stderr).splitlines()
        if line.startswith(("results/", "report/")) and not declared_folders.match(line)
    ]
    assert untracked == []


def test_the_run_leaves_nothing_in_tmpdir_once_its_processes_have_ended(smoke_run: Path):
    # torch.compile ran in it (the compile section, naive-compile attention), and writes into a
    # folder of the job's own, removed at its end, not into $TMPDIR/torchinductor_<user>.
    compiled = pd.read_csv(smoke_run / "results/default/compile/compile.csv")
    assert (compiled.loc[compiled["mode"] == "compiled", "status"] == "ok").any()
    # The job servers outlive the run until idle (15 s here): wait for them to go, then look.
    servers = smoke_servers(smoke_run)
    deadline = time.monotonic() + 180
    while servers.exists():
        assert time.monotonic() < deadline, f"job servers still running: {sorted(servers.iterdir())}"
        time.sleep(0.5)
    left = sorted(str(p.relative_to(smoke_tmp(smoke_run))) for p in smoke_tmp(smoke_run).rglob("*"))
    assert left == [], left


def test_a_cpu_run_is_not_told_about_gpus_it_did_not_use(smoke_run: Path):
    md = (smoke_run / "report/default/report.md").read_text()
    # Issue 32, item 13: nor given a GPU's explanations (cold start, section 2's method, the ceiling's).
    for phrase in ("the GPU waits between kernels", "GPU lease", "cuBLAS", "CUDA context", "cudaMalloc",
                   "NVTX range around the CUDA call", "same GPU right after", "Cpu time", "Steps 2 to 2",
                   # nor told its noisy rows are host-bound by the GPU's launches (a second reader's find)
                   "the GPU worked for less than", "the host's launches", "GPU-bound cells"):
        assert phrase not in md, phrase
    assert "job wrapper" in md  # the cost section's name for the phase a GPU run spends on its lease


def test_the_reports_text_holds_no_literal_markdown_backticks(smoke_run: Path):
    # The report's sentences are plain text in both files (escaped): a backtick would show as one.
    html = (smoke_run / "report/default/index.html").read_text()
    visible = re.sub(r"<(code|pre|script|style)\b.*?</\1>", "", html, flags=re.S)
    assert "`" not in visible, re.findall(r".{60}`.{60}", visible)[:3]
