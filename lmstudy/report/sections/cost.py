"""Section 8, the study's own cost: where this run's time went, by section, rule and phase."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.analyse.computed import computes_table  # noqa: E402
from lmstudy.analyse.study_cost import PHASE_COLUMNS, most_at_once  # noqa: E402
from lmstudy.phases import PHASES  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402

# The phases as the report names them, "other" last.
PHASE_LABELS = {f"{phase}_s": label for phase, label in PHASES.items()}
PHASE_LABELS["other_s"] = "the rest of the job's command: its shell, writing results, the processes' exit"
SHORT = {
    "wait_s": "GPU lease",
    "imports_s": "imports", "start_s": "process start", "build_s": "model builds",
    "compile_s": "compiling", "measure_s": "measuring", "profile_s": "profiler",
    "other_s": "other",
}
SECTION_ORDER = ["timing", "nsys", "precision", "memory", "attention", "compile", "report"]


def load(results: Path) -> pd.DataFrame:
    return result_files.read_csv(results / "cost" / "jobs.csv", missing_ok=True)


def _shares(frame: pd.DataFrame) -> dict[str, float]:
    total = frame["wall_s"].sum()
    columns = [*PHASE_COLUMNS, "other_s"]
    return {c: frame[c].sum() / total if total else float("nan") for c in columns}


@computes_table
def by_rule(frame: pd.DataFrame) -> pd.DataFrame:
    """Per section and rule: jobs, seconds, share of the run, and each phase's share."""
    total = frame["wall_s"].sum()
    rows = []
    for (section, rule), part in frame.groupby(["section", "rule"], sort=False):
        row = {
            "section": section, "rule": rule, "jobs": len(part),
            "measures on the device": "yes" if part["measuring"].any() else "no",
            "seconds": part["wall_s"].sum(),
            "share of run %": 100 * part["wall_s"].sum() / total if total else None,
        }
        for column, share in _shares(part).items():
            row[f"{SHORT[column]} %"] = 100 * share
        rows.append(row)
    table = pd.DataFrame(rows)
    order = {s: i for i, s in enumerate(SECTION_ORDER)}
    table["_order"] = table["section"].map(lambda s: order.get(s, len(order)))
    table = table.sort_values(["_order", "seconds"], ascending=[True, False], kind="stable")
    return table.drop(columns="_order").reset_index(drop=True)


def by_section(frame: pd.DataFrame) -> pd.DataFrame:
    """Seconds per section and phase, sections in the report's order."""
    columns = [*PHASE_COLUMNS, "other_s"]
    table = frame.groupby("section")[["wall_s", *columns]].sum()
    order = [s for s in SECTION_ORDER if s in table.index] + [
        s for s in table.index if s not in SECTION_ORDER
    ]
    return table.loc[order]


@computes_table
def slowest(frame: pd.DataFrame, count: int = 10) -> pd.DataFrame:
    top = frame.nlargest(count, "wall_s")
    table = top[["section", "rule", "job", "wall_s"]].rename(columns={"wall_s": "seconds"})
    for column in [*PHASE_COLUMNS, "other_s"]:
        table[f"{SHORT[column]} s"] = top[column]
    return table.reset_index(drop=True)


def _text(values: pd.Series) -> pd.Series:
    """Values as text, "" where missing; a whole number read back as a float (a GPU index: 0.0) as 0."""
    def one(value) -> str:
        if pd.isna(value):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    return values.astype(object).map(one)


def _leased(frame: pd.DataFrame) -> pd.DataFrame:
    """The measuring jobs with a record of where and when they ran (lmstudy.gpu_lease)."""
    if "started_at" not in frame:
        return frame.iloc[0:0]
    return frame[frame["measuring"]].dropna(subset=["started_at", "ended_at"])


def by_gpu(frame: pd.DataFrame) -> pd.DataFrame:
    """Per GPU the measuring jobs ran on: jobs, their seconds and the seconds they waited for it."""
    jobs = _leased(frame)
    if jobs.empty:
        return pd.DataFrame()
    jobs = jobs.assign(gpu=_text(jobs["gpu_index"]).replace("", "(none)"))
    waited = "waited_s" if "waited_s" in jobs else "wait_s"
    keys = ["host", "gpu"] if "host" in jobs and jobs["host"].nunique() > 1 else ["gpu"]
    table = jobs.groupby(keys, sort=True).agg(
        uuid=("gpu_uuid", "first"), chosen_by=("gpu_chosen_by", "first"), cpu_cores=("cpu_cores", "first"),
        jobs=("job", "size"), seconds=("wall_s", "sum"), waited_s=(waited, "sum"),
    )
    return table.reset_index().rename(columns={
        "gpu": "GPU (index)", "uuid": "UUID", "chosen_by": "chosen by", "cpu_cores": "CPU cores",
        "seconds": "job seconds", "waited_s": "seconds waited for it",
    })


def concurrency_findings(frame: pd.DataFrame) -> list[str]:
    """How many measuring jobs ran at once, on how many GPUs; waits; GPUs shared with others."""
    jobs = _leased(frame)
    if jobs.empty:
        return []
    at_once = most_at_once(jobs)
    gpus = sorted((g for g in set(_text(jobs["gpu_index"])) if g),
                  key=lambda g: (not g.isdigit(), int(g) if g.isdigit() else 0, g))  # 2 before 10
    span = jobs["ended_at"].max() - jobs["started_at"].min()
    busy = (jobs["ended_at"] - jobs["started_at"]).sum()
    where = f"on {len(gpus)} GPU(s) ({', '.join(gpus)})" if gpus else "with no GPU named"
    items = [
        f"Measuring jobs ran at most {at_once} at once, {where}: {busy:.0f} s of measuring jobs "
        f"within {span:.0f} s from the first one's start to the last one's end "
        f"({busy / span if span > 0 else 1:.1f} at a time on average)."
    ]
    column = "waited_s" if "waited_s" in jobs else "wait_s"
    waited = jobs[column].sum()
    if waited > 0:
        items.append(
            f"{(jobs[column] > 0).sum()} job(s) waited {waited:.0f} s in all for a GPU that another job "
            "held (another run on this machine, or more GPU jobs than GPUs)."
        )
    jobs = jobs.assign(gpu_index=_text(jobs["gpu_index"]), foreign_processes=_text(jobs["foreign_processes"]))
    foreign = jobs[jobs["foreign_processes"] != ""]
    if len(foreign):
        items.append(
            f"{len(foreign)} job(s) shared their GPU with processes not of this study, which may have "
            f"slowed them: " + "; ".join(
                f"{row['job']} on GPU {row['gpu_index']}: {row['foreign_processes']}"
                for _, row in foreign.head(5).iterrows()
            ) + "."
        )
    return items


def findings(frame: pd.DataFrame) -> list[str]:
    if frame.empty or not frame["wall_s"].sum() > 0:
        return []
    total = frame["wall_s"].sum()
    measuring = frame[frame["measuring"]]
    items = [
        f"The run's {len(frame)} jobs took {total:.0f} s ({total / 60:.1f} min) added up; "
        f"the {len(measuring)} jobs that measure on the device took {measuring['wall_s'].sum():.0f} s "
        f"of it ({100 * measuring['wall_s'].sum() / total:.0f}%)."
    ]
    if len(measuring):
        shares = _shares(measuring)
        parts = sorted(shares.items(), key=lambda kv: -kv[1])
        items.append(
            "In the measuring jobs the time went to "
            + ", ".join(f"{SHORT[c]} {100 * s:.0f}%" for c, s in parts if s >= 0.005)
            + "."
        )
    sections = by_section(frame)["wall_s"]
    top = sections.idxmax()
    items.append(
        f"The costliest section is {top}: {sections[top]:.0f} s, "
        f"{100 * sections[top] / total:.0f}% of the run."
    )
    worst = frame.loc[frame["wall_s"].idxmax()]
    items.append(f"The slowest job is {worst['rule']} {worst['job']} ({worst['wall_s']:.1f} s).")
    timing = measuring[measuring["rule"] == "time_model"]
    if len(timing):
        share = timing["measure_s"].sum() / timing["wall_s"].sum()
        items.append(
            f"Timing jobs spend {100 * share:.0f}% of their wall time measuring (warm-up and timed steps)."
        )
    return items


def make_figures(results: Path, out_dir: Path) -> None:
    frame = load(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    if frame.empty:
        return
    table = by_section(frame)
    columns = [c for c in [*PHASE_COLUMNS, "other_s"] if table[c].sum() > 0]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(table) + 1.6))
    left = pd.Series(0.0, index=table.index)
    for column in columns:
        ax.barh(table.index, table[column], left=left, label=SHORT[column])
        left += table[column]
    ax.invert_yaxis()
    ax.set_xlabel("job seconds, added up")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.tight_layout()
    fig.savefig(out_dir / "cost.png")
    plt.close(fig)


def build(results: Path, figures: Path) -> Section:
    section = Section("cost", "8. The study's own cost")
    frame = load(results)
    if frame.empty:
        return section.add(Text("No cost records: the run had no jobs."))
    section.add(Text(
        "Every job's wall time is Snakemake's benchmark record of it (results/<run>/benchmarks/). "
        "Jobs that measure on the device also record their phases: "
        + "; ".join(f"{SHORT[c]} = {PHASE_LABELS[c]}" for c in [*PHASE_COLUMNS, "other_s"])
        + ". Seconds are added up over jobs (job-seconds: with one GPU job at a time, the GPU's time); "
        "where several GPU jobs ran at once, the findings say how many. Not counted: the jobs "
        "that make this section (study_cost, its figure) and render this report."
    ))
    section.add(Findings(findings(frame) + concurrency_findings(frame)))
    section.add(Figure(figures / "cost.png", "Seconds per section, by phase."))
    section.add(Table("Time by section and rule", by_rule(frame)))
    section.add(Table("The ten slowest jobs (s)", slowest(frame)))
    gpus = by_gpu(frame)
    if not gpus.empty:
        section.add(Table("Measuring jobs per GPU", gpus))
    return section
