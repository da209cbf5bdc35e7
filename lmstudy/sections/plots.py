"""What every figure of the report shares (its look is workflow/report/figures.mplstyle).

- the legend outside the data, to the right of the panels (`legend_outside`);
- log axes with plain tick labels, 0.5 and 2 rather than 5×10⁻¹ and 2×10⁰ (`plain_log`);
- a reference line where a ratio of 1 matters (`reference_line`);
- ratios on a log axis fitted to the points, intervals past it cut at its edge with their value
  written, hollow where the interval holds 1 (`ratio_limits`, `ratio_points`);
- OOM and not-measured marked where the point or bar would be (`mark_missing`);
- no empty panels: a caller draws a panel only for data it has (`has_values`).

No torch here; matplotlib only.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

MISSING_MARK = {"OOM": "OOM", "not measured": "not\nmeasured", "unsupported": "unsup-\nported"}


def subplots(rows: int = 1, columns: int = 1, **kwargs):
    """plt.subplots with the layout that keeps an outside legend and the titles in the figure."""
    kwargs.setdefault("squeeze", False)
    return plt.subplots(rows, columns, layout="constrained", **kwargs)


def _plain(value: float, _=None) -> str:
    if value <= 0 or not math.isfinite(value):
        return ""
    return f"{value:g}" if 1e-3 <= value < 1e5 else f"{value:.0e}"


def plain_log(ax, axis: str = "y", base: float = 10) -> None:
    """A log axis whose ticks read as plain numbers. Within one decade (ratios, 0.5 to 3)
    the 2s and 5s get labels too, so the axis is never left with one labelled tick."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log", base=base)
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    target.set_major_formatter(FuncFormatter(_plain))
    if base == 10 and low > 0 and high / low < 30:
        target.set_minor_locator(LogLocator(base=10, subs=(2.0, 3.0, 5.0)))
        target.set_minor_formatter(FuncFormatter(_plain))
    else:
        target.set_minor_formatter(NullFormatter())


def power_of_two_ticks(ax, values, axis: str = "x") -> None:
    """A log2 axis ticked exactly at the measured values (context or sequence lengths)."""
    values = sorted({int(v) for v in values})
    if axis == "x":
        ax.set_xscale("log", base=2)
        ax.set_xticks(values, [str(v) for v in values])
    else:
        ax.set_yscale("log", base=2)
        ax.set_yticks(values, [str(v) for v in values])
    ax.minorticks_off()


def reference_line(ax, value: float = 1.0, label: str = "1.0× (no change)") -> None:
    """The line a ratio is read against: above it faster, below it slower."""
    ax.axhline(value, color="0.35", lw=0.9, ls=":", zorder=1, label=label)


def room_above(ax, log: bool = False) -> float:
    """Make room above the data for marks of what is missing; return the height to mark at."""
    low, high = ax.get_ylim()
    if log and low > 0:
        ax.set_ylim(low, high * 2.2)
        return high * 1.4
    ax.set_ylim(low, high + 0.25 * (high - low))
    return high + 0.1 * (high - low)


def mark_missing(ax, x, y: float, status: str, color=None) -> None:
    """Mark OOM or not-measured at (x, y), where the point or the bar would be.

    A boxed label, no marker: a marker would read as a measured point. Near
    either end of the x axis the label grows inwards, so it never runs over
    the axis and its tick labels.
    """
    text = MISSING_MARK.get(status, status)
    x_shown = ax.xaxis.convert_units(x)
    at = ax.transAxes.inverted().transform(ax.transData.transform((x_shown, y)))[0]
    ha = "left" if at < 0.2 else "right" if at > 0.8 else "center"
    ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, 2), ha=ha, va="bottom",
                fontsize="x-small", color=color or "0.3", zorder=4,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": color or "0.5",
                      "linestyle": "--", "linewidth": 0.6})


def legend_outside(fig, axes, title: str | None = None) -> None:
    """One legend for the figure, right of the panels, entries gathered from every panel once."""
    seen = {}
    for ax in (axes.flat if hasattr(axes, "flat") else axes):
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside right upper", title=title,
                   fontsize="small")


def has_values(series: pd.Series | None) -> bool:
    """True when a panel would show something: at least one finite number."""
    if series is None:
        return False
    numbers = pd.to_numeric(series, errors="coerce")
    return bool(numbers.notna().any())


def ratio_limits(values, pad: float = 2.0) -> tuple[float, float]:
    """A log axis's limits for ratios, fitted to the points and 1.0 (never to their intervals): from a
    factor `pad` below the smallest to `pad` above the largest."""
    shown = [float(v) for v in values if v == v and v > 0] + [1.0]
    return min(shown) / pad, max(shown) * pad


def ratio_points(ax, x, y, low, high, limits: tuple[float, float], color, label: str, marker: str = "o",
                 line: str | None = None, slot: int = 0, annotate: bool = True) -> None:
    """Ratios with their intervals on a log axis fitted to the points (`ratio_limits`).

    An interval that runs past the axis is drawn to its edge, ended by an arrowhead, and its value
    written there, so one wide interval (0.0035-456) no longer flattens every point at the floor. A
    point whose interval holds 1 (not told apart from 1) is hollow. `slot` (the series' number) staggers
    the written values of series cut at the same edge.
    """
    bottom, top = limits
    x, y = list(x), [float(v) for v in y]
    low = [float(v) for v in low] if low is not None else [math.nan] * len(y)
    high = [float(v) for v in high] if high is not None else [math.nan] * len(y)
    if line:
        ax.plot(x, y, line, color=color, lw=1.2)
    for xi, yi, lo, hi in zip(x, y, low, high, strict=True):
        if not (yi == yi and yi > 0):
            continue
        known = lo == lo and hi == hi
        if known:
            shown_lo, shown_hi = max(lo, bottom * 1.05), min(hi, top / 1.05)
            ax.plot([xi, xi], [shown_lo, shown_hi], color=color, lw=0.9, zorder=2)
            for value, edge, mark, inward in ((lo, shown_lo, "v", 1), (hi, shown_hi, "^", -1)):
                if value != edge:
                    ax.plot([xi], [edge], mark, color=color, ms=4, zorder=3)
                    ax.annotate(_plain(float(f"{value:.3g}")), (xi, edge), textcoords="offset points",
                                xytext=(5, inward * (2 + 9 * slot)), ha="left",
                                va="bottom" if inward > 0 else "top", fontsize="x-small", color=color)
        undecided = known and lo <= 1 <= hi
        ax.plot([xi], [yi], marker, color=color, ms=6, zorder=4,
                markerfacecolor="white" if undecided else color, label=label)
        if annotate:
            ax.annotate(f"{yi:.2f}×", (xi, yi), textcoords="offset points", xytext=(-5, 0), ha="right",
                        va="center", fontsize="x-small", color=color)
    ax.set_yscale("log")
    ax.set_ylim(bottom, top)
    plain_log(ax)
    # Labelled major ticks at 1, 2 and 5 of each decade: they survive a caller's minorticks_off.
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_formatter(NullFormatter())
