"""Section 6, the whole model under torch.compile: the functions that compute its tables (pandas only)."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.trust import gpu_ratio, marks
from lmstudy.report.labels import PASS_LABELS

KEY = ["size", "precision", "attention", "pass"]


def _where_ok(part: pd.DataFrame, column: str) -> pd.Series | float:
    """`column` where the row ran; NaN where it did not, or where no row ran and the table lacks it."""
    if column not in part:  # every configuration out of memory: the table has no timing columns
        return float("nan")
    return pd.to_numeric(part[column], errors="coerce").where(part["status"] == "ok")


def comparison(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per size x precision x attention x pass: eager vs compiled."""
    eager = frame[frame["mode"] == "eager"].set_index(KEY)
    compiled = frame[frame["mode"] == "compiled"].set_index(KEY)
    out = pd.DataFrame(index=eager.index.union(compiled.index))
    for name, part in (("eager", eager), ("compiled", compiled)):
        out[f"{name}_status"] = part["status"]
        out[f"{name}_ms"] = _where_ok(part, "median_ms")
        out[f"{name}_first_excess_s"] = _where_ok(part, "first_step_excess_s")
        # Fresh processes each mode was measured in (lmstudy.measure.repeat); absent in older runs.
        out[f"{name}_processes"] = part["processes"] if "processes" in part else float("nan")
        for bound in ("ci_low_ms", "ci_high_ms", "gpu_busy_ms"):
            out[f"{name}_{bound}"] = _where_ok(part, bound)
        for flag in ("host_bound", "noisy"):
            out[f"{name}_{flag}"] = part[flag].fillna(False).astype(bool) if flag in part else False
    # The attention the eager model ran, as its measuring process saw the operators (absent in older
    # runs): a user's model is measured as its factory builds it, whatever the attention setting says.
    out["attention_ran"] = eager["attention_ran"] if "attention_ran" in eager else float("nan")
    out["speedup"] = out["eager_ms"] / out["compiled_ms"]
    out["gpu_speedup"] = out["eager_gpu_busy_ms"] / out["compiled_gpu_busy_ms"]
    for flag in ("host_bound", "noisy"):
        out[flag] = out[f"eager_{flag}"] | out[f"compiled_{flag}"]
    # Eager and compiled are told apart only where both have intervals and they do not overlap.
    bounds = out[[f"{m}_{b}" for m in ("eager", "compiled") for b in ("ci_low_ms", "ci_high_ms")]]
    out["has_interval"] = bounds.notna().all(axis=1)
    out["apart"] = out["has_interval"] & (
        (out["compiled_ci_high_ms"] < out["eager_ci_low_ms"])
        | (out["eager_ci_high_ms"] < out["compiled_ci_low_ms"])
    )
    # GPU time's range over the processes (lmstudy.analyse.trust.gpu_ratio): decided where it excludes 1.
    ranges = [gpu_ratio(eager.loc[k], compiled.loc[k]) if k in eager.index and k in compiled.index
              else (float("nan"),) * 3 for k in out.index]
    out["gpu_speedup_low"] = [r[1] for r in ranges]
    out["gpu_speedup_high"] = [r[2] for r in ranges]
    out["compile_s"] = out["compiled_first_excess_s"]
    out = out.reset_index()
    out = pd.concat([out, pd.DataFrame([break_even(r) for _, r in out.iterrows()], index=out.index)], axis=1)
    return out


def break_even(row) -> dict:
    """Steps after which the compile has paid for itself, from the gain its measure decides.

    Wall time's gain where eager and compiled are told apart in wall time (`apart`); where they are
    not, the GPU's busy time's where every process's GPU time tells them apart (a host-bound step,
    whose launches compiling cuts, still saves at least the GPU work it removes); none where neither
    decides a gain ("not told apart"), nor where compiled is slower."""
    nan = float("nan")
    compile_s = row.get("compile_s", nan)
    if row.get("apart"):
        saved, measure = row["eager_ms"] - row["compiled_ms"], "wall time"
    elif pd.notna(row.get("gpu_speedup_low")) and (row["gpu_speedup_low"] > 1 or row["gpu_speedup_high"] < 1):
        saved, measure = row["eager_gpu_busy_ms"] - row["compiled_gpu_busy_ms"], "GPU time"
    else:
        return {"break_even_steps": nan, "break_even_from": "not told apart"}
    if not (pd.notna(saved) and saved > 0 and pd.notna(compile_s)):
        return {"break_even_steps": nan, "break_even_from": "compiled is not faster" if pd.notna(saved)
                else "not measured"}
    return {"break_even_steps": compile_s * 1e3 / saved, "break_even_from": measure}


@computes_table
def comparison_table(comp: pd.DataFrame) -> pd.DataFrame:
    def shown(ms, status):
        return ms.astype(object).where(status == "ok", status)

    def interval(mode):
        return [f"{a:.3g}–{b:.3g}" if pd.notna(a) and pd.notna(b) else ""
                for a, b in zip(comp[f"{mode}_ci_low_ms"], comp[f"{mode}_ci_high_ms"], strict=True)]

    table = pd.DataFrame(
        {
            "size": comp["size"],
            "precision": comp["precision"],
            "attention": comp["attention"],
            "attention as run (eager)": comp.get("attention_ran"),
            "pass": comp["pass"].map(PASS_LABELS),
            "eager ms": shown(comp["eager_ms"], comp["eager_status"]),
            "eager 95% CI ms": interval("eager"),
            "compiled ms": shown(comp["compiled_ms"], comp["compiled_status"]),
            "compiled 95% CI ms": interval("compiled"),
            "speed-up ×": comp["speedup"],
            "told apart": ["" if not h else ("yes" if a else "no, intervals overlap")
                           for h, a in zip(comp["has_interval"], comp["apart"], strict=True)],
            "GPU-time speed-up ×": comp.get("gpu_speedup"),
            "compile s": comp["compile_s"],
            "eager first-step excess s": comp["eager_first_excess_s"],
            "break-even steps": comp["break_even_steps"],
            "break-even from": comp["break_even_from"],
            "flags": [marks(r) for _, r in comp.iterrows()],
        }
    )
    optional = ("attention as run (eager)", "eager 95% CI ms", "compiled 95% CI ms", "told apart",
                "GPU-time speed-up ×")
    empty = [c for c in optional if not table[c].replace("", pd.NA).notna().any()]
    return table.drop(columns=empty)


@computes_table
def across_table(measurements: pd.DataFrame) -> pd.DataFrame:
    """Each eager measurement of a compiled configuration, by the section that made it."""
    def interval(low, high):
        return [f"{a:.3g}–{b:.3g}" if pd.notna(a) and pd.notna(b) else ""
                for a, b in zip(low, high, strict=True)]

    table = pd.DataFrame({
        "size": measurements["size"],
        "context": measurements["context_length"],
        "precision": measurements["precision"],
        "pass": measurements["pass"].map(PASS_LABELS),
        "measured in": measurements["source"],
        "median ms": measurements["median_ms"],
        "95% CI ms": interval(measurements["ci_low_ms"], measurements["ci_high_ms"]),
        "processes": measurements["processes"],
        "GPU busy ms": pd.to_numeric(measurements["gpu_busy_ms"], errors="coerce"),
        "GPU index": measurements["gpu_index"],
    })
    return table[[c for c in table.columns if table[c].replace("", pd.NA).notna().any()]]
