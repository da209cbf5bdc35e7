"""The study's rates, computed in one place: tokens per second, achieved TFLOP/s and MFU.

Every rate is a quantity over a time (or a rate over a peak), and every one
has the same guard: where a part is missing (None or NaN) or the divisor is
not positive, there is no rate: None for a number, NaN in a pandas column.
A measuring job calls these on one row's numbers, the report on whole
columns; both get the same arithmetic, so a row's tokens_per_s and the
check that reads it (lmstudy.sections.timing.products) agree to the bit.

Stdlib only (a pandas Series is recognised by its methods, never imported):
measure/, analyse/ and the sections all import it from the ground floor.
"""

from __future__ import annotations

import math

# A TFLOP/s is 1e12 FLOPs in a second; a millisecond is 1e-3 s.
TERA = 1e12
MS_PER_S = 1e3


def _is_column(value) -> bool:
    """A pandas Series (or Index, or NumPy array): arithmetic is element-wise."""
    return hasattr(value, "where") or hasattr(value, "dtype")


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def over(part, whole):
    """`part / whole`, or no value where either is missing or `whole` is not positive.

    Numbers: None for no value. Columns (either side a pandas Series): NaN
    where there is none, the quotient elsewhere.
    """
    if _is_column(whole):
        return part / whole.where(whole > 0)
    if _is_column(part):
        return part / whole if not _missing(whole) and whole > 0 else part * math.nan
    if _missing(part) or _missing(whole) or whole <= 0:
        return None
    return part / whole


_UNSET = object()


def _seconds(seconds, ms):
    """The time in seconds, given once as `seconds` or `ms` (None or NaN: no time, so no rate)."""
    if (seconds is _UNSET) == (ms is _UNSET):
        raise TypeError("give the time once: seconds= or ms=")
    if seconds is not _UNSET:
        return seconds
    return None if _missing(ms) else ms / MS_PER_S


def tokens_per_second(tokens, *, seconds=_UNSET, ms=_UNSET):
    """Tokens processed per second: a step's `tokens` (batch x context) over its time."""
    time = _seconds(seconds, ms)
    return over(tokens, time)


def achieved_tflops(flops, *, seconds=_UNSET, ms=_UNSET):
    """Achieved TFLOP/s: `flops` done in the time given. No FLOPs counted (None, NaN, 0): none."""
    time = _seconds(seconds, ms)
    if not _is_column(flops) and (_missing(flops) or flops <= 0):
        return None
    done = over(flops, time)
    return None if done is None else done / TERA


def share_of_peak(tflops, peak_tflops):
    """An achieved rate over a peak rate, as a fraction. Over the datasheet's dense peak of the
    precision it ran in, this is the MFU; over a measured matmul ceiling, the share of it."""
    return over(tflops, peak_tflops)


def step_rates(median_ms, *, tokens, flops, peak_tflops) -> dict:
    """A timed step's rates, as a result row holds them: tokens_per_s, achieved_tflops and mfu
    (over `peak_tflops`, the datasheet peak; None off a GPU or for a GPU the table lacks)."""
    tflops = achieved_tflops(flops, ms=median_ms)
    return {
        "tokens_per_s": tokens_per_second(tokens, ms=median_ms),
        "achieved_tflops": tflops,
        "mfu": share_of_peak(tflops, peak_tflops),
    }
