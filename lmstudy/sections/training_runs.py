"""What the data-parallel and the sharding sections share: their method paragraphs' values, and their
step times with intervals over ranks and steps."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse import stats
from lmstudy.model_choice import BUILTIN_NAME
from lmstudy.report.labels import interval_text


def listed(values) -> str:
    """The distinct values, in the order seen: "2, 4"."""
    return ", ".join(str(v) for v in dict.fromkeys(values))


def models(frame: pd.DataFrame) -> list[str]:
    """The labels of the models the rows trained (column model); rows from before the column trained
    the built-in model, the only one these sections trained then."""
    if "model" not in frame:
        return [BUILTIN_NAME]
    return list(dict.fromkeys(frame["model"].dropna().astype(str))) or [BUILTIN_NAME]


def with_model(frame: pd.DataFrame, config: list[str]) -> list[str]:
    """A table's configuration columns, led by the model's label where the rows name it, so the table
    says which model ran (one a run: config model:)."""
    return ["model", *config] if "model" in frame else list(config)


def method_values(frame: pd.DataFrame) -> dict:
    """The values a distributed training section's method.j2 macro takes, from its rows."""
    trained = models(frame)
    return {
        "model": ", ".join(trained),
        "own": any(name != BUILTIN_NAME for name in trained),
        "sizes": listed(frame["size"]),
        "world_sizes": listed(frame["world_size"]),
        "context_length": listed(frame["context_length"]),
        "batch_size": listed(frame["batch_size"]),
        "steps": int(frame["step"].max()) + 1,
        "device": listed(frame["device"]),
    }


def step_intervals(frame: pd.DataFrame, config: list[str], seconds: str = "step_s") -> pd.DataFrame:
    """Per configuration, the step time over its ranks and timed steps: the median over the ranks of
    each rank's median (ms) and its 95% interval, as the timing section gives one over fresh processes
    (lmstudy.analyse.stats.process_summary: a bootstrap over ranks, then steps, widened to Student's t
    over the ranks' medians). The ranks are the processes: each is a fresh spawned process of its own,
    but one group's ranks share its start, so a new group may land outside the interval."""
    rows = []
    for key, part in frame.groupby(config, sort=False):
        ranks = [group[seconds].dropna().tolist() for _, group in part.groupby("rank", sort=True)]
        summary = stats.process_summary(ranks)
        rows.append({
            **dict(zip(config, key, strict=True)),
            "step_ms": summary["median"] * 1e3,
            "ci_low_ms": summary["ci_low"] * 1e3,
            "ci_high_ms": summary["ci_high"] * 1e3,
            "ranks": summary["processes"],
        })
    return pd.DataFrame(rows, columns=[*config, "step_ms", "ci_low_ms", "ci_high_ms", "ranks"])


def apart(faster: pd.Series, slower: pd.Series) -> bool:
    """`faster`'s 95% interval lies wholly below `slower`'s: told apart, not ranked on noise."""
    return bool(faster["ci_high_ms"] < slower["ci_low_ms"])


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """A step table as the report shows it: the interval's bounds as one "95% CI ms" cell."""
    where = table.columns.get_loc("ci_low_ms")
    cell = interval_text(table["ci_low_ms"], table["ci_high_ms"])
    return table.drop(columns=["ci_low_ms", "ci_high_ms"]).assign(**{"95% CI ms": cell}).pipe(
        lambda t: t[[*t.columns[:where], "95% CI ms", *t.columns[where:-1]]]
    )
