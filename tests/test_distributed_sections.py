"""The comm, ddp and sharding sections of the report, from real rows of a CPU run (Gloo, 2 processes:
tests/fixtures/distributed/), and the link limit read from nvidia-smi's text."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lmstudy.measure import link_limit
from lmstudy.sections.comm import section as comm
from lmstudy.sections.comm.tables import bandwidth_table
from lmstudy.sections.ddp import section as ddp
from lmstudy.sections.ddp.tables import step_table
from lmstudy.sections.sharding import section as sharding
from lmstudy.sections.sharding.tables import memory_table

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "distributed"


def frame(name: str) -> pd.DataFrame:
    return pd.read_csv(FIXTURES / f"{name}.csv")


def text_of(built) -> str:
    parts = []
    for block in built.blocks:
        items = getattr(block, "items", None)
        parts.append(
            " ".join(str(getattr(i, "text", i)) for i in items) if items else str(getattr(block, "text", ""))
        )
    return " ".join(parts)


@pytest.mark.parametrize("contract", [comm.SECTION, ddp.SECTION, sharding.SECTION], ids=lambda c: c.name)
def test_each_section_builds_with_a_table_and_findings(tmp_path, contract):
    product = tmp_path / contract.products[contract.name]
    product.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / f"{contract.name}.csv", product)
    built = contract.build(tmp_path, tmp_path / "figures")
    assert [b for b in built.blocks if hasattr(b, "frame")], "no table"
    findings = [b for b in built.blocks if type(b).__name__ == "Findings"]
    assert findings and findings[0].items, "no finding"
    assert "switched off" not in text_of(built)


def test_bus_bandwidth_is_nccl_tests_definition_of_the_slowest_ranks_time():
    rows = frame("comm")
    table = bandwidth_table(rows)
    one = table[table["size_mb"] == 1].iloc[0]
    per_repeat = rows[rows["size_mb"] == 1].groupby("repeat")["seconds"].max()
    assert one["time_ms"] == pytest.approx(per_repeat.median() * 1e3)
    assert one["algbw_gbps"] == pytest.approx(1e6 / per_repeat.median() / 1e9)
    assert one["busbw_gbps"] == pytest.approx(one["algbw_gbps"] * 2 * (2 - 1) / 2)
    # On a CPU the link's limit is unknown, and the finding says so.
    assert one["link"] == "unknown" and np.isnan(one["link_gbps"])
    assert "the link's limit is unknown" in " ".join(comm.FINDINGS[0](rows))


def test_every_data_parallel_version_has_a_row_and_its_exposed_communication():
    table = step_table(frame("ddp"))
    assert list(table["version_label"]) == [
        "none",
        "naive",
        "flat",
        "overlapped",
        "bucketed 0.01 MB",
        "bucketed 1 MB",
        "ddp",
    ]
    none = table.set_index("version_label").loc["none", "step_ms"]
    flat = table.set_index("version_label").loc["flat"]
    assert flat["exposed_comm_ms"] == pytest.approx(flat["step_ms"] - none)
    assert flat["comm_ms"] > 0 and np.isnan(flat["hidden_share"])
    assert table.set_index("version_label")["hidden_share"].drop(["none", "naive", "flat"]).notna().all()
    # A CPU run records the ranges (lmstudy.measure.comm_ranges): every version that communicates has them.
    assert table.set_index("version_label")["hidden_share_ranges"].drop(["none"]).between(0, 1).all()
    # The table says which model trained (the rows' label).
    assert table.columns[0] == "model" and set(table["model"]) == {"lmstudy built-in Transformer LM"}
    # On this loaded CPU the fastest version beat the step without communication: said as noise, not a share.
    from lmstudy.sections.ddp.findings import fastest

    (sentence,) = fastest(frame("ddp"))
    assert "within the steps' own variation" in sentence and "-" not in sentence.split("ms")[-1]


def test_sharded_state_is_about_half_on_two_ranks():
    table = memory_table(frame("sharding"))
    after = table[table["phase"] == "after_step"].set_index("sharded")
    whole, sharded = after.loc[False, "state_mb"], after.loc[True, "state_mb"]
    assert whole == pytest.approx(2 * after.loc[False, "params_mb"], rel=0.01)  # two fp32 moments
    assert 0.45 < sharded / whole < 0.6
    assert list(table["phase"][:3]) == ["after_init", "before_step", "after_step"]


H100_NVLINK = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n" + "".join(
    f"\t Link {i}: 26.562 GB/s\n" for i in range(18)
)
TOPO = (
    "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
    "GPU0\t X \tNV18\tSYS\t0-15\n"
    "GPU1\tNV18\t X \tSYS\t0-15\n"
    "GPU2\tSYS\tSYS\t X \t16-31\n"
)


def test_the_link_limit_from_nvidia_smi():
    assert link_limit.nvlink_gbps(H100_NVLINK) == pytest.approx(478.116)
    assert link_limit.nvlink_gbps("GPU 0: x\n\t Link 0: <inactive>\n") == 0.0
    assert link_limit.topology_kind(TOPO, 2) == "NVLink"
    assert link_limit.topology_kind(TOPO, 3) == "PCIe"
    assert link_limit.pcie_gbps(5, 16) == pytest.approx(63.0, rel=0.01)
    assert link_limit.read("cpu", 2)["link"] == "unknown"


@pytest.mark.parametrize("contract", [comm.SECTION, ddp.SECTION, sharding.SECTION], ids=lambda c: c.name)
def test_two_runs_compare_on_their_common_configurations(tmp_path, contract):
    from lmstudy.analyse.compare.runs import Run
    from lmstudy.report.contract import ComparedRuns

    rows = frame(contract.name)
    measured = "seconds" if contract.name == "comm" else "step_s"
    slower = rows.assign(**{measured: rows[measured] * 2})
    runs = ComparedRuns(
        a=Run("a", tmp_path, {contract.name: rows}),
        b=Run("b", tmp_path, {contract.name: slower}),
        min_effect=0.05,
        figures=tmp_path,
    )
    built = contract.compare.build(runs)
    (table,) = [b for b in built.blocks if hasattr(b, "frame")]
    assert table.frame["B/A"].to_numpy() == pytest.approx(2.0)  # every time doubles
    assert set(table.frame["ranks A/B"]) == {"2/2"}
    assert "slower" in set(table.frame["verdict"]) and not {"faster", "same"} & set(table.frame["verdict"])
    assert "slower" in text_of(built)
    # A run against itself is never faster or slower.
    same = ComparedRuns(a=Run("a", tmp_path, {contract.name: rows}),
                        b=Run("b", tmp_path, {contract.name: rows}), min_effect=0.05, figures=tmp_path)
    (table,) = [b for b in contract.compare.build(same).blocks if hasattr(b, "frame")]
    assert set(table.frame["verdict"]) <= {"same", "undecided"}  # this noisy CPU's: undecided, not a claim

def _ddp_rows(steps: dict) -> pd.DataFrame:
    rows = []
    for (version, bucket), times in steps.items():
        for step, seconds in enumerate(times):
            for rank in (0, 1):
                rows.append({"size": "small", "context_length": 128, "batch_size": 4, "device": "cuda",
                             "world_size": 2, "gradient_bytes": 1, "version": version, "bucket_mb": bucket,
                             "step": step, "rank": rank, "step_s": seconds,
                             "comm_s": seconds / 4 if version in ("naive", "flat") else float("nan")})
    return pd.DataFrame(rows)


def test_the_quickest_data_parallel_step_is_ranked_only_where_its_interval_is_apart():
    """The GPU check's small on 2 H200s: bucketed 10 MB's median was quickest, its steps overlapping
    naive's and flat's; a finding says so instead of calling it the fastest."""
    from lmstudy.sections.ddp.findings import buckets, fastest

    overlapping = _ddp_rows({("none", 0.0): [0.040, 0.041, 0.042], ("naive", 0.0): [0.044, 0.050, 0.052],
                             ("flat", 0.0): [0.045, 0.046, 0.047], ("bucketed", 10.0): [0.043, 0.044, 0.045],
                             ("bucketed", 100.0): [0.049, 0.050, 0.051]})
    said = str(fastest(overlapping)[0])
    assert "not told apart from them" in said and "naive, flat" in said, said
    assert "their intervals overlapping" in said, said
    assert "not told apart" not in buckets(overlapping)[0]  # 43-45 ms against 49-51 ms: apart
    apart = _ddp_rows({("none", 0.0): [0.040, 0.041, 0.042], ("naive", 0.0): [0.060, 0.061, 0.062],
                       ("flat", 0.0): [0.050, 0.051, 0.052]})
    said = str(fastest(apart)[0])
    assert "not told apart" not in said and "overlapping" not in said, said
    assert "flat has the quickest" in said, said


def test_step_intervals_come_from_ranks_and_steps():
    """The interval holds the median, widens where the ranks disagree, and ranks only what it tells apart."""
    from lmstudy.sections.training_runs import apart, step_intervals

    agree = _ddp_rows({("flat", 0.0): [0.050, 0.051, 0.052, 0.050, 0.051]})
    (row,) = step_intervals(agree, ["version"]).to_dict("records")
    assert row["ci_low_ms"] <= row["step_ms"] <= row["ci_high_ms"] and row["ranks"] == 2
    disagree = agree.assign(step_s=agree["step_s"] * (1 + 0.3 * agree["rank"]))
    (wide,) = step_intervals(disagree, ["version"]).to_dict("records")
    assert wide["ci_high_ms"] - wide["ci_low_ms"] > 5 * (row["ci_high_ms"] - row["ci_low_ms"])
    assert not apart(pd.Series(row), pd.Series(wide)) and not apart(pd.Series(wide), pd.Series(row))


def test_sharding_step_cost_ranks_only_where_the_intervals_are_apart():
    from lmstudy.sections.sharding.findings import step_cost

    rows = frame("sharding")
    (said,) = step_cost(rows)
    assert "not told apart" in said  # the fixture's CPU steps overlap
    sharded = rows["sharded"].astype(str) == "True"
    slower = rows.assign(step_s=rows["step_s"].where(~sharded, rows["step_s"] * 20))
    (said,) = step_cost(slower)
    assert "intervals apart" in said and "not told apart" not in said, said


def test_the_share_hidden_from_the_ranges_is_pooled_over_steps_and_ranks():
    from lmstudy.sections.ddp.findings import hidden_by_ranges

    rows = _ddp_rows({("none", 0.0): [0.040] * 3, ("flat", 0.0): [0.050] * 3,
                      ("overlapped", 0.0): [0.045] * 3})
    rows["comm_span_s"] = rows["version"].map({"flat": 0.010, "overlapped": 0.008})
    rows["comm_in_backward_s"] = rows["version"].map({"flat": 0.0, "overlapped": 0.006})
    rows.loc[(rows["version"] == "overlapped") & (rows["step"] == 0), "comm_in_backward_s"] = 0.0
    table = step_table(rows).set_index("version_label")
    assert table.loc["flat", "hidden_share_ranges"] == 0.0
    assert table.loc["overlapped", "hidden_share_ranges"] == pytest.approx(2 * 0.006 / (3 * 0.008))
    assert np.isnan(table.loc["none", "hidden_share_ranges"])
    (said,) = hidden_by_ranges(rows)
    assert "overlapped 50% of 8.0 ms" in said and "flat 0%" in said, said
    # A run without ranges (a GPU run) has no such finding.
    assert hidden_by_ranges(rows.drop(columns=["comm_span_s", "comm_in_backward_s"])) == []


@pytest.mark.parametrize("contract", [comm.SECTION, ddp.SECTION, sharding.SECTION], ids=lambda c: c.name)
def test_each_section_draws_its_figure_and_shows_it(tmp_path, contract):
    product = tmp_path / contract.products[contract.name]
    product.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / f"{contract.name}.csv", product)
    figures = tmp_path / "figures"
    contract.draw(tmp_path, figures)
    (png,) = contract.figures
    assert (figures / png).stat().st_size > 10_000
    built = contract.build(tmp_path, figures)
    shown = [b for b in built.blocks if type(b).__name__ == "Figure"]
    assert [b.path.name for b in shown] == [png]


def test_the_bandwidth_figure_draws_the_link_limit_where_known():
    import matplotlib.pyplot as plt

    from lmstudy.sections.comm import figures

    rows = frame("comm").assign(link="NVLink", link_gbps=478.0)
    fig = figures.bandwidth_figure(rows)
    plt.close(fig)
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert "NVLink limit, 478 GB/s per direction" in labels and "2 processes" in labels
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_the_link_is_read_between_the_leased_gpus_not_gpu_0():
    """GPUs 0 and 1 are joined by NVLink, GPU 2 only through the CPU: a job leased 1 and 2 has PCIe."""
    assert link_limit.leased(2, {"CUDA_VISIBLE_DEVICES": "1,2"}) == [1, 2]
    assert link_limit.leased(2, {}) == [0, 1]
    uuids = "0, GPU-aaa\n1, GPU-bbb\n2, GPU-ccc\n"
    assert link_limit.leased(2, {"CUDA_VISIBLE_DEVICES": "GPU-ccc,GPU-bbb"}, uuids) == [2, 1]
    assert link_limit.leased(2, {"CUDA_VISIBLE_DEVICES": "GPU-zzz,GPU-bbb"}, uuids) == []
    assert link_limit.topology_kind(TOPO, [1, 2]) == "PCIe"
    assert link_limit.topology_kind(TOPO, [0, 1]) == "NVLink"
    assert link_limit.topology_kind(TOPO, [1, 0]) == "NVLink"
    assert link_limit.topology_kind(TOPO, [2, 3]) == ""  # no GPU3 in the matrix: unread, not guessed
