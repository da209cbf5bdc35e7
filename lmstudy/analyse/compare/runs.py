"""The two runs of a comparison: their tables, environments, and what differs between them.

A run is a folder results/<run>/ as the study writes it, perhaps copied from
another machine: every table is read through lmstudy.analyse.result_files, so a
damaged file is named with the way to redo it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.analyse.links import check_links_inside
from lmstudy.analyse.tables import environment_of
from lmstudy.environment import ENVIRONMENT_COLUMNS
from lmstudy.errors import UserError

# The one table a comparison needs, relative to results/<run>/; the others it reads are those the
# report's sections declare (lmstudy.report.compare.compared_products), handed to load() and
# fingerprint() as `tables` (name -> path under results/<run>/).
REQUIRED = "timing/timing.csv"
DIMENSIONS = ("d_model", "d_ff", "num_layers", "num_heads")


@dataclasses.dataclass
class Run:
    name: str
    folder: Path
    tables: dict[str, pd.DataFrame]

    def __getitem__(self, key: str) -> pd.DataFrame:
        return self.tables[key]


def _others(results: Path, name: str) -> str:
    runs = sorted(p.name for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    runs = [r for r in runs if r != name]
    return f"the runs here are {', '.join(runs)}" if runs else f"{results}/ holds no run"


# As the config allows (workflow/schemas/config.schema.yaml): two names and "_vs_" make one folder name.
MAX_NAME = 100


def remake(name: str, path: Path) -> str:
    """How to make one table of run `name` again: name it as the target, with the run's own settings.

    The comparison does not declare the runs' tables as its inputs (it must
    never measure), and a finished study does not remake a deleted table by
    itself: only naming the table makes Snakemake build it.
    """
    return (
        f"make it again by naming it as the target, with the settings that run was made with "
        f"(snakemake --cores 1 --config run={name} <its preset and settings> -- {path})"
    )


def check_run(results: Path, name: str) -> Path:
    """results/<name>, or a UserError naming what to do when it is not a run's folder."""
    if "_vs_" in name:
        raise UserError(
            f"The comparison's run name {name!r} contains '_vs_', which separates the two runs of "
            f"report/compare/<A>_vs_<B>/, so the target is ambiguous: rename the folder results/{name}/ "
            "(and its run) without '_vs_'."
        )
    if len(name) > MAX_NAME:
        raise UserError(
            f"The run name {name[:40]!r}... is {len(name)} characters long, too long for a comparison's "
            f"folder name: rename results/{name[:40]}.../ to at most {MAX_NAME} characters."
        )
    folder = results / name
    if not folder.is_dir():
        raise UserError(
            f"There is no run named {name!r}: {folder}/ does not exist ({_others(results, name)}); "
            f"copy that run's results folder to {folder}/ or run the study with --config run={name}."
        )
    if not (folder / REQUIRED).exists():
        raise UserError(
            f"{folder}/ has no {REQUIRED}, which a comparison needs: "
            f"{remake(name, folder / REQUIRED)}, or copy that run's whole results folder, "
            "timing table included."
        )
    return folder


def fingerprint(results: Path, name: str, tables: dict[str, str]) -> str:
    """A digest of the `tables` a comparison of run `name` reads (paths, sizes, modification times)."""
    folder = check_run(results, name)
    digest = hashlib.sha256()
    for relative in tables.values():
        path = folder / relative
        if path.exists():
            stat = path.stat()
            digest.update(f"{relative}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def load(results: Path, name: str, tables: dict[str, str]) -> Run:
    """Run `name`'s `tables` (name -> path under results/<name>/), each empty where the run has none."""
    folder = check_run(results, name)
    check_links_inside(folder)
    frames = {}
    for key, relative in tables.items():
        try:
            frames[key] = result_files.read_csv(folder / relative, missing_ok=True)
        except result_files.DamagedResult as error:
            if not error.what:
                raise
            # Its own advice (run the same command again) would fail the same way: the comparison
            # does not remake a run's tables.
            raise UserError(
                f"{error.path} is damaged or not a result file ({error.what}): delete it "
                f"(rm '{error.path}') and {remake(name, error.path)}."
            ) from None
    return Run(name, folder, frames)


def _values(frame: pd.DataFrame, column: str) -> str:
    if frame.empty or column not in frame:
        return "n/a"
    seen = sorted({str(v) for v in frame[column].dropna().unique()})
    return ", ".join(seen) if seen else "n/a"


def settings(run: Run) -> dict[str, str]:
    """What a reader needs to know of a run to compare it: environment and the study's settings."""
    frames = [f for f in run.tables.values() if not f.empty]
    shown = environment_of(frames)
    timing = run["timing"]
    for column, label in (
        ("batch_size", "batch size"),
        ("vocab_size", "vocabulary"),
        ("timed_steps", "timed steps"),
        ("warmup_steps", "warm-up steps"),
    ):
        shown[label] = _values(timing, column)
    for size, dims in size_dimensions(run).items():
        shown[f"size {size}"] = dims
    return shown


def size_dimensions(run: Run) -> dict[str, str]:
    """Each size's dimensions as one string ('d_model 768, d_ff 3072, 12 layers, 12 heads')."""
    timing = run["timing"]
    if timing.empty or not set(DIMENSIONS) <= set(timing.columns):
        return {}
    first = timing.drop_duplicates("size").set_index("size")
    return {
        str(size): (
            f"d_model {int(row['d_model'])}, d_ff {int(row['d_ff'])}, "
            f"{int(row['num_layers'])} layers, {int(row['num_heads'])} heads"
        )
        for size, row in first.iterrows()
    }


def environment_table(a: Run, b: Run) -> pd.DataFrame:
    """One row per setting: A's value, B's, and whether they differ."""
    sa, sb = settings(a), settings(b)
    keys = [*ENVIRONMENT_COLUMNS, *(k for k in sa if k not in ENVIRONMENT_COLUMNS)]
    keys += [k for k in sb if k not in keys]
    rows = []
    for key in keys:
        va, vb = sa.get(key, "not in this run"), sb.get(key, "not in this run")
        if key == "date":
            differs = "not compared"  # two runs are always made at different times
        else:
            differs = "differs" if va != vb else "same"
        # A named column: a header cell left empty reads as an index to a reader (and the browser check).
        rows.append({"setting": key, f"A: {a.name}": va, f"B: {b.name}": vb, "A vs B": differs})
    return pd.DataFrame(rows)


def warnings(a: Run, b: Run) -> list[str]:
    """Differences that make a comparison unfair, each in one sentence."""
    sa, sb = settings(a), settings(b)
    items = []
    for key, what in (("tf32_matmul", "matrix products"), ("tf32_cudnn", "cuDNN convolutions")):
        if sa.get(key) != sb.get(key):
            items.append(
                f"TF32 for fp32 {what} differs (A: {sa.get(key)}, B: {sb.get(key)}): with TF32 on, fp32 "
                "matrix products run on tensor cores with a 10-bit mantissa, so the fp32 rows compare "
                "two different computations, not two machines or versions."
            )
    if sa["batch size"] != sb["batch size"]:
        items.append(
            f"The batch size differs (A: {sa['batch size']}, B: {sb['batch size']}): a step does different "
            "work in each run, so step times are not comparable; compare tokens/s instead."
        )
    if sa["vocabulary"] != sb["vocabulary"]:
        items.append(
            f"The vocabulary differs (A: {sa['vocabulary']}, B: {sb['vocabulary']}): the embedding and the "
            "LM head differ in size, so every model differs."
        )
    da, db = size_dimensions(a), size_dimensions(b)
    for size in sorted(set(da) & set(db)):
        if da[size] != db[size]:
            items.append(
                f"Size {size} has other dimensions in each run (A: {da[size]}; B: {db[size]}): its rows "
                "compare two different models under one name."
            )
    return items


def unfair_sizes(a: Run, b: Run) -> set[str]:
    da, db = size_dimensions(a), size_dimensions(b)
    return {s for s in set(da) & set(db) if da[s] != db[s]}
