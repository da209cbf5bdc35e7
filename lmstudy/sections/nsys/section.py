"""The kernel profiles section (Nsight Systems): kernel tables, category shares and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.analyse.nsys import tables as T
from lmstudy.analyse.nsys.events import phase_of
from lmstudy.analyse.nsys.names import kernel_alias
from lmstudy.report import contract
from lmstudy.report.contract import Comparison, SectionContract
from lmstudy.report.coverage import also_not_recorded, first_count, lacks, with_columns
from lmstudy.report.labels import in_size_order, sentence_start
from lmstudy.report.render import Figure, Section, Table, Text
from lmstudy.sections.nsys import answers as nsys_answers
from lmstudy.sections.nsys import compare as nsys_compare
from lmstudy.sections.nsys.figures import SHARES_FIGURE, draw_figures
from lmstudy.sections.nsys.findings import FINDINGS, findings
from lmstudy.sections.nsys.tables import _with_status, words

__all__ = [
    "SECTION",
    "SHARES_FIGURE",
    "_with_status",
    "backend_record",
    "build",
    "draw_figures",
    "findings",
    "load",
    "make_figures",
    "words",
]


# The columns the section reads that a run may lack (with_columns: shown as n/a and named as not
# recorded). A kernel's range, path and phase are blank outside every range, so not required; its shape
# (batch, d_model, heads) gives attention's FLOPs, which a model of your own may not name.
KERNELS_RECORDED = ("range", "path", "phase", "adopted_ns", "batch_size", "d_model", "num_heads")
RUNS_RECORDED = ("warmup_steps", "batch_size")


def load(results: Path) -> dict[str, pd.DataFrame]:
    data = {name: SECTION.read(results, product) for name, product in
            (("kernels", "kernels"), ("ranges", "ranges"), ("runs", "profiles"), ("timing", "timing"))}
    kernels = data["kernels"]
    if not kernels.empty:
        if "phase" not in kernels and "path" in kernels:
            kernels["phase"] = kernels["path"].fillna("").map(phase_of)  # what the profile job writes
        kernels = data["kernels"] = with_columns(kernels, KERNELS_RECORDED)
        kernels[["range", "path", "phase"]] = kernels[["range", "path", "phase"]].astype(object).fillna("")
    if not data["ranges"].empty:
        data["ranges"]["path"] = data["ranges"]["path"].fillna("")
    if not data["runs"].empty:
        data["runs"] = also_not_recorded(with_columns(data["runs"], RUNS_RECORDED), kernels)
    return data


def backend_record(results: Path) -> dict:
    """How the run's profiler was chosen (the nsys_backend job's answer); {} if absent."""

    path = results / SECTION.products["backend"]
    return result_files.read_json(path) if path.exists() else {}


_say = contract.wording(__name__)


def _kept_profiles(results: Path, runs: pd.DataFrame) -> str:
    """Where the profiles themselves are: only the files that are there (a copied run folder may
    lack them), each once; runs.csv names them from the project's root."""
    listed = runs.get("files", pd.Series(dtype=str)).dropna()
    named = dict.fromkeys(f for files in listed for f in str(files).split())
    root = results.parent.parent
    kept = [f for f in named if (root / f).exists() or Path(f).exists()]
    return _say("profiles", kept=kept, absent=[f for f in named if f not in kept])


def with_alias(table: pd.DataFrame) -> pd.DataFrame:
    """A kernel table with each kernel's short name (what it does) first, its full name beside."""
    if table.empty or "kernel" not in table:
        return table
    if (table["kernel"].map(kernel_alias) == table["kernel"]).all():
        return table  # short names already (operators on a CPU): nothing to add
    table = table.rename(columns={"kernel": "full name"})
    table.insert(list(table.columns).index("full name"), "kernel", table["full name"].map(kernel_alias))
    return table


def make_figures(results: Path, out_dir: Path) -> None:
    draw_figures(load(results), out_dir)


def _as_percent(shares: pd.DataFrame) -> pd.DataFrame:
    """The category shares with headers that say they are percentages ("GEMM (%)"), so they are
    written as every percentage of the report is: one decimal, "<0.1" for a sliver, "0" for none."""
    return shares.rename(columns={c: f"{c} %" for c in T.CATEGORIES if c in shares})


def body(section: Section, data: dict[str, pd.DataFrame], results: Path, figures: Path) -> None:
    runs = data["runs"]
    said = words(runs)
    section.title = said["title"]  # names the profiler it ran
    first = runs.iloc[0]
    versions = ", ".join(sorted({str(v) for v in runs.get("nsys_version", pd.Series()).dropna() if str(v)}))
    method = SECTION.prose(
        "method", backends=", ".join(sorted(set(runs["backend"]))), versions=versions,
        warmup=first_count(runs, "warmup_steps"), profiled=int(first["profiled_steps"]),
        batch=first_count(runs, "batch_size"), precision=first["precision"],
        kernels=said["kernel"] == "kernel")
    note = backend_record(results).get("note")
    SECTION.opening(section, runs, method, notes=[note] if note else [], answers=nsys_answers.answers(data),
                    findings=findings(data))
    a = in_size_order(T.forward_time_table(data["ranges"], runs, data["timing"]))
    section.add(Table(_say("step_time_title", profiler=said["profiler"]), _with_status(a, said["column"]),
                      name="nsys_step_time"))
    kernels = data["kernels"]
    if kernels.empty:
        section.add(Text(_say("no_kernels")))
        return
    _kernel_tables(section, kernels, said["time"])
    section.add(Text(_kept_profiles(results, runs)))
    section.add(Figure(figures / SHARES_FIGURE, _say("shares_caption", time=said["time"]),
                       data="nsys_category_shares"))


def _kernel_tables(section: Section, kernels: pd.DataFrame, time: str) -> None:
    """The tables of the kernels: (b) to (e), then by module and by category."""
    section.add(Table(_say("top_kernels_title"), with_alias(in_size_order(T.top_kernels(kernels))),
                      name="nsys_top_kernels"))
    c = with_alias(in_size_order(T.top_non_gemm_forward(kernels)))
    if not c.empty:
        section.add(Table(_say("non_gemm_title"), c, name="nsys_top_non_gemm_forward"))
    section.add(Table(_say("gemm_title", time=time), in_size_order(T.gemm_share(kernels)),
                      name="nsys_gemm_share"))
    e = in_size_order(T.attention_table(kernels))
    if not e.empty:
        section.add(Table(_say("attention_title"), e, name="nsys_attention",
                          note=_say("attention_note", softmax_flops=T.SOFTMAX_FLOPS_PER_ELEMENT)))
    else:
        section.add(Text(_say("attention_unranged" if lacks(kernels, "range") else "attention_elsewhere")))
    modules = in_size_order(T.module_table(kernels))
    if not modules.empty:
        section.add(Table(_say("modules_title", time=sentence_start(time)), with_alias(modules),
                          name="nsys_modules"))
    section.add(Table(_say("shares_title", time=time), _as_percent(in_size_order(T.category_shares(kernels))),
                      name="nsys_category_shares"))


SECTION = SectionContract(
    name="nsys",
    title="Kernel profiles",
    measures="Nsight Systems (or torch.profiler) profiles: kernels by NVTX range, top kernels, GEMM share, "
    "softmax vs matmul inside attention.",
    products={
        "kernels": "nsys/kernels.csv",
        "ranges": "nsys/ranges.csv",
        "profiles": "nsys/runs.csv",
        "backend": "nsys/backend.json",
        "timing": "timing/timing.csv",
    },
    body=body,
    empty="No profiles: the section is switched off or produced no runs.",
    load=load,
    nothing=lambda data: data["runs"].empty,
    coverage=("sizes", "context_lengths", "passes"),
    make_figures=make_figures,
    tables=(T.forward_time_table, T.top_kernels, T.top_non_gemm_forward, T.gemm_share, T.attention_table,
            T.category_shares),
    figures=(SHARES_FIGURE,),
    findings=FINDINGS,
    answers=nsys_answers.answers,
    compare=Comparison(reads=("kernels", "profiles"), build=nsys_compare.section,
                       findings=nsys_compare.FINDINGS),
)

build = SECTION.build
