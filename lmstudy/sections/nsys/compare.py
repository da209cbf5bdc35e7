"""Section 2 in the comparison of two runs: GPU time by kernel category and kernel.

The numbers, rows and cases are chosen here; the wording is in compare.j2 beside it."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse.compare import tables as T  # noqa: E402
from lmstudy.analyse.compare import verdict as V  # noqa: E402
from lmstudy.analyse.compare.runs import Run  # noqa: E402
from lmstudy.registry import numbered, reference  # noqa: E402
from lmstudy.report import compare_cells as cells  # noqa: E402
from lmstudy.report.contract import ComparedRuns, wording  # noqa: E402
from lmstudy.report.finding import Finding, finds, gather, rows_behind  # noqa: E402
from lmstudy.report.labels import PASS_LABELS  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402

PROFILE_KEY = ["size", "context_length", "pass", "precision"]


_say = wording(__name__)


def _per_step_kernels(run: Run) -> pd.DataFrame:
    kernels = run["kernels"]
    if kernels.empty:
        return kernels
    kernels = kernels[kernels["status"] == "ok"] if "status" in kernels else kernels
    steps = kernels["profiled_steps"] if "profiled_steps" in kernels else 1
    return kernels.assign(ms_per_step=kernels["total_ns"] / steps / 1e6)


def profile_status(run: Run) -> pd.DataFrame:
    """One row per profiled configuration with its status (nsys/runs.csv)."""
    runs = run["profiles"]
    if runs.empty:
        return pd.DataFrame(columns=[*PROFILE_KEY, "status"])
    return runs[[*PROFILE_KEY, "status"]].drop_duplicates(PROFILE_KEY)


def profiled_configurations(a: Run, b: Run) -> pd.DataFrame:
    """Every profiled configuration of either run, with both statuses and a verdict of T.presence."""
    joined = T.join(profile_status(a), profile_status(b), PROFILE_KEY)
    if joined.empty:
        return joined
    statuses = zip(joined["status_a"], joined["status_b"], strict=True)
    joined["presence"] = [T.presence(x, y) for x, y in statuses]
    return joined


def without_kernels(a: Run, b: Run) -> list[str]:
    """The runs (A, B) that have profiles (nsys/runs.csv) but no kernel table (nsys/kernels.csv)."""
    return [
        side
        for side, run in (("A", a), ("B", b))
        if not run["profiles"].empty and _per_step_kernels(run).empty
    ]


def kernel_categories(a: Run, b: Run) -> pd.DataFrame:
    """GPU time per step by kernel category, per configuration profiled in both runs.

    Empty when either run has no kernel table: its kernels are not in that run, and a category's
    time of 0 would read as a kernel that vanished (and divide by zero).
    """
    sums = []
    for run in (a, b):
        kernels = _per_step_kernels(run)
        if kernels.empty:
            return pd.DataFrame()
        per_category = kernels.groupby([*PROFILE_KEY, "category"], sort=False)["ms_per_step"].sum()
        sums.append(per_category.reset_index())
    configs = profiled_configurations(a, b)
    if configs.empty:
        return pd.DataFrame()
    both = configs[configs["presence"] == ""][PROFILE_KEY]
    joined = T.join(sums[0], sums[1], [*PROFILE_KEY, "category"])
    joined = joined.merge(both, on=PROFILE_KEY, how="inner")
    joined["ms_a"] = pd.to_numeric(joined["ms_per_step_a"], errors="coerce").fillna(0.0)
    joined["ms_b"] = pd.to_numeric(joined["ms_per_step_b"], errors="coerce").fillna(0.0)
    # A category absent from A has no change to state (NaN), not an infinite one.
    joined["change"] = (joined["ms_b"] / joined["ms_a"].where(joined["ms_a"] > 0)) - 1
    return joined[[*PROFILE_KEY, "category", "ms_a", "ms_b", "change"]]


def top_kernel_changes(a: Run, b: Run, min_effect: float, per_configuration: int = 5) -> pd.DataFrame:
    """Per configuration profiled in both: the kernels that changed most, appeared or vanished."""
    ka, kb = _per_step_kernels(a), _per_step_kernels(b)
    configs = profiled_configurations(a, b)
    if ka.empty or kb.empty or configs.empty:
        return pd.DataFrame()
    both = configs[configs["presence"] == ""][PROFILE_KEY]
    key = [*PROFILE_KEY, "kernel", "category"]
    sa = ka.groupby(key, sort=False)["ms_per_step"].sum().reset_index()
    sb = kb.groupby(key, sort=False)["ms_per_step"].sum().reset_index()
    joined = T.join(sa, sb, key).merge(both, on=PROFILE_KEY, how="inner")
    joined["ms_a"] = joined["ms_per_step_a"].fillna(0.0)
    joined["ms_b"] = joined["ms_per_step_b"].fillna(0.0)
    joined["delta_ms"] = joined["ms_b"] - joined["ms_a"]
    joined["change"] = [
        V.change_verdict(x, y, min_effect) for x, y in zip(joined["ms_a"], joined["ms_b"], strict=True)
    ]
    joined["magnitude"] = joined["delta_ms"].abs()
    top = (
        joined.sort_values("magnitude", ascending=False, kind="stable")
        .groupby(PROFILE_KEY, sort=False)
        .head(per_configuration)
    )
    order = {tuple(k): i for i, k in enumerate(both.itertuples(index=False, name=None))}
    top = top.assign(_order=[order[tuple(k)] for k in top[PROFILE_KEY].itertuples(index=False, name=None)])
    top = top.sort_values(["_order", "magnitude"], ascending=[True, False], kind="stable")
    columns = [*PROFILE_KEY, "kernel", "category", "change", "ms_a", "ms_b", "delta_ms"]
    return top[columns].reset_index(drop=True)


def categories_figure(categories: pd.DataFrame, a: str, b: str, out: Path) -> bool:
    """GPU time per step by kernel category, A beside B, summed over the configurations profiled in both."""
    if categories.empty:
        return False
    passes = [p for p in PASS_LABELS if p in set(categories["pass"])]
    fig, axes = plt.subplots(1, len(passes), squeeze=False, figsize=(5.5 * len(passes), 3.8))
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = categories[categories["pass"] == pass_name]
        sums = part.groupby("category", sort=False)[["ms_a", "ms_b"]].sum()
        x = range(len(sums))
        ax.bar([i - 0.2 for i in x], sums["ms_a"], 0.4, label=f"A: {a}")
        ax.bar([i + 0.2 for i in x], sums["ms_b"], 0.4, label=f"B: {b}")
        ax.set_xticks(list(x), list(sums.index), rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("GPU ms per step (sum over configurations)")
        ax.set_title(PASS_LABELS[pass_name])
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return True


@finds
def _unmatched_profiles(configs: pd.DataFrame) -> list[Finding]:
    """Each configuration profiled in one run only, or not ok in one."""
    if configs.empty:
        return []
    unmatched = configs[configs["presence"] != ""]
    return [
        Finding(
            _say(
                "unmatched",
                label=cells.config_label(unmatched.iloc[i]),
                presence=unmatched.iloc[i]["presence"],
            ),
            rows_behind(unmatched.iloc[[i]], "status_a", "status_b", "presence"),
        )
        for i in range(len(unmatched))
    ]


def _category_part(category, row, min_effect: float) -> dict:
    """How one category's time changed from A to B: appeared, the same within `min_effect`, or changed."""
    if row["ms_a"] == 0:
        return {"category": category, "case": "appeared", "ms_b": row["ms_b"]}
    change = row["ms_b"] / row["ms_a"] - 1
    if abs(change) < min_effect:
        return {"category": category, "case": "same"}
    return {"category": category, "case": "changed", "fell": change < 0, "by": abs(change) * 100}


def _category_rows(part: pd.DataFrame, sums: pd.DataFrame, pass_name: str) -> pd.DataFrame:
    """The pairs compared: each category's time in A and in B, summed over the configurations, largest
    in A first (the sentence names the first four)."""
    configurations = part[PROFILE_KEY].drop_duplicates()
    behind = sums.sort_values("ms_a", ascending=False, kind="stable").reset_index()
    behind = behind.assign(change=behind["ms_b"] / behind["ms_a"].where(behind["ms_a"] > 0) - 1)
    behind.insert(0, "configurations", len(configurations))
    behind.insert(0, "pass", pass_name)
    return behind


@finds
def _category_changes(categories: pd.DataFrame, min_effect: float) -> list[Finding]:
    """Per pass: GPU time per step in A and in B, summed over the configurations profiled in both, and
    how the four largest categories of A changed."""
    if categories.empty:
        return []
    items = []
    for pass_name in [p for p in PASS_LABELS if p in set(categories["pass"])]:
        part = categories[categories["pass"] == pass_name]
        sums = part.groupby("category", sort=False)[["ms_a", "ms_b"]].sum()
        sums = sums[(sums["ms_a"] > 0) | (sums["ms_b"] > 0)]
        parts = [
            _category_part(category, row, min_effect)
            for category, row in sums.sort_values("ms_a", ascending=False).head(4).iterrows()
        ]
        items.append(
            Finding(
                _say(
                    "category_changes",
                    step=PASS_LABELS[pass_name],
                    total_a=sums["ms_a"].sum(),
                    total_b=sums["ms_b"].sum(),
                    parts=parts,
                    within=min_effect * 100,
                ),
                _category_rows(part, sums, pass_name),
            )
        )
    return items


# Its comparison's findings, each with the rows of A and B behind it.
FINDINGS = (_unmatched_profiles, _category_changes)


def kernel_findings(categories: pd.DataFrame, configs: pd.DataFrame, min_effect: float) -> list[Finding]:
    """Every finding of the comparison's kernel section, in the report's order."""
    return gather(_unmatched_profiles(configs), _category_changes(categories, min_effect))


def _tables(
    section: Section, a, b, configs: pd.DataFrame, categories: pd.DataFrame, min_effect: float, figures: Path
) -> None:
    """The comparison's tables and figure: profiles in one run only, time by category, top kernels."""
    listing = configs[configs["presence"] != ""]
    if len(listing):
        listing = listing[[*PROFILE_KEY, "presence"]].rename(
            columns={"presence": "state", "context_length": "context"}
        )
        listing["pass"] = listing["pass"].map(PASS_LABELS)
        section.add(Table(_say("unmatched_title"), listing, name="nsys_unmatched"))
    if not categories.empty:
        table = categories.rename(
            columns={"context_length": "context", "ms_a": "A ms/step", "ms_b": "B ms/step"}
        )
        table["pass"] = table["pass"].map(PASS_LABELS)
        table["change %"] = table.pop("change") * 100
        section.add(Table(_say("categories_title"), table, name="nsys_categories"))
        if categories_figure(categories, a.name, b.name, figures / "categories.png"):
            section.add(Figure(figures / "categories.png", _say("categories_caption")))
    top = top_kernel_changes(a, b, min_effect=min_effect)
    if not top.empty:
        top = top.rename(
            columns={
                "context_length": "context",
                "ms_a": "A ms/step",
                "ms_b": "B ms/step",
                "delta_ms": "B−A ms/step",
            }
        )
        top["pass"] = top["pass"].map(PASS_LABELS)
        section.add(Table(_say("top_title"), top, name="nsys_top_kernels"))


def _section_kernels(a, b, min_effect, figures: Path) -> Section:
    section = Section("nsys", numbered("nsys", _say("title")))
    configs = profiled_configurations(a, b)
    if configs.empty:
        return section.add(Text(_say("no_profiles", where=reference("nsys"))))
    categories = kernel_categories(a, b)
    section.add(Text(_say("intro")))
    missing = without_kernels(a, b)
    if missing:
        section.add(
            Text(
                _say("without_kernels", missing=[(side, (a if side == "A" else b).name) for side in missing])
            )
        )
    section.add(Findings(kernel_findings(categories, configs, min_effect)))
    _tables(section, a, b, configs, categories, min_effect, figures)
    return section


def section(runs: ComparedRuns) -> Section:
    return _section_kernels(runs.a, runs.b, runs.min_effect, runs.figures)
