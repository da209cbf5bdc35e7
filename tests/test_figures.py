"""The figures' shared style (lmstudy/sections/plots.py) and the words that go with them."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.ladder import section as ladder  # noqa: E402
from lmstudy.sections.nsys import section as nsys  # noqa: E402


def _labels(ax) -> list[str]:
    ax.figure.canvas.draw()
    ticks = ax.yaxis.get_majorticklabels() + ax.yaxis.get_minorticklabels()
    return [t.get_text() for t in ticks if t.get_text()]


def test_a_ratio_axis_reads_in_plain_numbers():
    fig, axes = plots.subplots()
    ax = axes[0][0]
    ax.plot([1, 2, 3], [0.6, 1.4, 2.8])
    plots.plain_log(ax, "y")
    labels = _labels(ax)
    assert labels and not any("10^" in t or "\\times" in t or "×10" in t for t in labels), labels
    assert {"1", "2"} <= set(labels), labels
    plt.close(fig)


def test_a_ratio_plot_has_its_reference_line_and_the_legend_sits_outside():
    fig, axes = plots.subplots(1, 2)
    for ax in axes[0]:
        ax.plot([1, 2], [0.9, 1.2], label="bf16")
        plots.reference_line(ax)
    plots.legend_outside(fig, axes)
    assert all(any(list(line.get_ydata()) == [1, 1] for line in ax.get_lines()) for ax in axes[0])
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in axes[0])
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["bf16", "1.0× (no change)"]
    plt.close(fig)


def test_a_missing_point_is_marked_where_it_would_be():
    fig, axes = plots.subplots()
    ax = axes[0][0]
    plots.mark_missing(ax, 64, 10.0, "OOM")
    assert [t.get_text() for t in ax.texts] == ["OOM"]
    assert tuple(ax.texts[0].xy) == (64, 10.0)
    plt.close(fig)


def test_a_missing_mark_is_a_label_inside_the_axes_not_a_point():
    fig, axes = plots.subplots(figsize=(4, 3))
    ax = axes[0][0]
    ax.plot([32, 64, 128], [1.0, 2.0, 3.0], "o-")
    ax.set_xscale("log", base=2)
    ax.set_xticks([32, 64, 128], ["32", "64", "128"])
    points = len(ax.collections) + len(ax.lines)
    plots.mark_missing(ax, 32, 3.0, "oversized: OOM")  # at the left edge, as section 1's figure does
    plots.mark_missing(ax, 128, 3.0, "oversized: OOM")  # and the right
    assert len(ax.collections) + len(ax.lines) == points  # no marker that reads as a data point
    fig.canvas.draw()
    box = ax.get_window_extent()
    for text in ax.texts:
        extent = text.get_window_extent()
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1, (text.get_text(), extent, box)
        assert text.get_bbox_patch() is not None  # boxed: a label, not data
    plt.close(fig)


def test_the_ladder_on_a_cpu_has_no_mfu_and_marks_what_could_not_run(tmp_path):
    from lmstudy.atomic import write_csv

    rows = []
    for key, status, ms in (("fp32", "ok", 10.0), ("bf16", "ok", 12.0),
                            ("bf16-sdpa-cudagraphs-master", "unsupported", None)):
        rows.append({"size": "tiny", "rung_key": key, "rung": key, "context_length": 32, "batch_size": 2,
                     "precision": key[:4],
                     "status": status, "median_ms": ms, "achieved_tflops": 0.01 if ms else None,
                     "matmul_tflops": 0.5, "share_of_matmul": 0.02 if ms else None,
                     "reason": None if ms else "CUDA graphs need a CUDA device, and this run is on cpu.",
                     "gpu": "cpu (x86_64)", "gpu_busy_ms": 8.0 if ms else None,
                     "gpu_ms_GEMM": 5.0 if ms else None, "gpu_ms_other": 3.0 if ms else None,
                     "warmup_steps": 1, "timed_steps": 3, "profile_steps": 1})
    write_csv(tmp_path / "ladder" / "ladder.csv", pd.DataFrame(rows))
    frame = ladder.ladder_frame(pd.DataFrame(rows))
    assert not plots.has_values(frame["mfu"])
    assert "MFU %" not in ladder.ladder_table(frame)
    # bf16 is slower here: the words say so, never "gain".
    said = ladder.findings(frame)
    assert "tiny: no rung is faster than the one below it beyond noise." in said
    assert any("CPU operator time per step" in s and "outside those operators" in s for s in said)
    ladder.SECTION.draw(tmp_path, tmp_path / "figures")
    for name in (ladder.SHARE_FIGURE, ladder.TIME_FIGURE):
        assert (tmp_path / "figures" / name).stat().st_size > 5000
    # The figure's rungs are the tables' names, and its caption says so (not the config's keys).
    from lmstudy.report.render import Figure

    captions = [b.caption for b in ladder.build(tmp_path, tmp_path / "figures").blocks
                if isinstance(b, Figure) and b.path.name == ladder.TIME_FIGURE]
    assert captions and "named as in the tables" in captions[0] and "key" not in captions[0]


def test_section_2_names_the_profiler_that_ran():
    cpu = pd.DataFrame({"backend": ["torch"], "gpu": ["cpu (x86_64)"]})
    gpu = pd.DataFrame({"backend": ["nsys"], "gpu": ["NVIDIA H200"]})
    assert nsys.words(cpu)["title"] == "2. Operator profiles on the CPU (torch.profiler)"
    assert nsys.words(cpu)["time"] == "CPU time"
    assert nsys.words(gpu)["title"] == "2. Kernel profiles (Nsight Systems)"
    assert nsys.words(gpu)["time"] == "GPU time"


def test_the_ladder_share_figure_puts_the_gpu_busy_share_beside_the_wall_share():
    """Issue 38: where the findings rank host-bound rungs on GPU time, the figure shows that share too."""
    from lmstudy.sections.ladder.figures import _gpu_share

    rows = pd.DataFrame({"flops_per_step": [1e12, 1e12], "gpu_busy_ms": [10.0, float("nan")],
                         "matmul_tflops": [200.0, 200.0]})
    share = _gpu_share(rows)
    assert share.iloc[0] == pytest.approx(0.5) and share.isna().iloc[1]
    assert _gpu_share(rows.drop(columns="gpu_busy_ms")).isna().all()  # a CPU or older run: no diamonds
