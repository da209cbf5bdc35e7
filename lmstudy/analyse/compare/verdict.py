"""Is B faster than A, slower, the same, or undecided? The verdict rule of a comparison.

As nvbench's compare (FAST, SLOW, SAME, AMBG) and pyperf's `compare_to`
with worker processes: a configuration is measured in several fresh
processes a side, and the interval of B/A comes from the variation between
processes (lmstudy.analyse.stats.ratio_interval: a hierarchical bootstrap,
widened to Welch's t interval over the processes' log-medians; in a
comparison of many rows, to the spread between processes pooled over the
rows of the same regime instead: lmstudy.analyse.stats.pooled_intervals,
lmstudy.analyse.compare.tables.judge). With the minimum-effect band
[1/(1+e), 1+e]:

- same: the whole interval lies inside the band;
- faster / slower: the whole interval lies below / above the band;
- undecided: the interval straddles an edge of the band (too noisy to say).

A side measured in one process only (a run made before repetition) cannot
show the variation between processes, which on a launch-bound model
dominates: its verdict is "one process", never a claim.

Three measures of a step get a verdict each (lmstudy.analyse.compare.tables.judge),
each against the band its own noise allows: wall time (above, band
compare.min_effect), the GPU's busy time (the same rule on its per-process
values, band `Noise.gpu_min_effect`: GPU time agrees within 0.71% between
two runs where wall time moves by tens of percent; where a side has one
value, as runs made before every process recorded it, the interval is the
between-process agreement of GPU time, `Noise.gpu_agreement`), and kernels
launched per step (exact: equal or differs). `reading` puts the three in one line.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence

from lmstudy.analyse import stats

FASTER = "faster"
SLOWER = "slower"
SAME = "same"
UNDECIDED = "undecided"
ONE_PROCESS = "one process"
TOO_FEW = "not measured"
VERDICTS = (FASTER, SLOWER, SAME, UNDECIDED, ONE_PROCESS, TOO_FEW)
# Kernels launched per step are counted exactly: a count is equal or it is not.
EQUAL = "equal"
DIFFERS = "differs"
KERNEL_VERDICTS = (EQUAL, DIFFERS, TOO_FEW)
MEANINGS = {
    FASTER: "B's interval lies wholly below the band: B is faster",
    SLOWER: "B's interval lies wholly above the band: B is slower",
    SAME: "the interval of B/A lies wholly inside the band",
    UNDECIDED: "the interval of B/A straddles an edge of the band: too noisy to tell",
    ONE_PROCESS: "a side was measured in one process, which cannot show the variation between processes",
}

CONFIDENCE = stats.CONFIDENCE
# The pooled interval's quantile (lmstudy.analyse.stats.pooled_intervals). The pool sees how far a
# process wanders within a run, not a drift between the two runs' jobs (another load on the machine
# while one run's job measured), so the quantile leaves a margin beyond 95%. Measured on the 2-core
# CPU shared with other test runs (docs/trust.md): five smoke A/A comparisons of 18 rows called 2, 0,
# 1, 1 and 0 rows at 95%, 0, 0, 0, 1 and 0 at 97.5%; eight batch x4 A/Bs were slower in 5 to 16 of 18
# rows at 95%, 2 to 16 at 97.5% (Welch's interval: 1 to 13). On the two-humped model of issue 30,
# 97.5% calls at most 2% of A/A rows (tests/test_compare_false_alarms.py).
POOLED_CONFIDENCE = 0.975
# A regime's pool of processes gives the interval of its rows only with at least this many degrees
# of freedom (sum over its rows' sides of processes - 1); with fewer, each row's own Welch interval.
MIN_POOLED_FREEDOM = 10


@dataclasses.dataclass(frozen=True)
class Noise:
    """What the comparison needs of the study's noise settings (config.yaml's noise and compare).

    min_gpu_busy and max_spread flag a side host-bound or noisy as the study's tables do;
    gpu_agreement is how closely two processes' GPU busy times of the same work agree (B/A within
    1 +- it, 95%), used where a side has one process's GPU time and the runs give no pool of their
    own: measured on H200s, 0.8% between runs in all 27 timing cells. gpu_min_effect is GPU busy
    time's band (compare.gpu_min_effect): above what an A/A shows (0.71% plus the interval), below
    the smallest real change to be called (2.1%). compiled_agreement is how closely two
    compilations of the same model agree (compare.compiled_agreement): a whole-model compiled row
    is one compilation a run, so its intervals are at least that wide
    (lmstudy.analyse.compare.compiled).
    """

    min_gpu_busy: float
    max_spread: float
    gpu_agreement: float
    gpu_min_effect: float
    compiled_agreement: float


@dataclasses.dataclass(frozen=True)
class Comparison:
    """B against A for one configuration; ratio = B / A (below 1: B is faster)."""

    processes_a: int
    processes_b: int
    median_a: float
    median_b: float
    ratio: float
    ci_low: float
    ci_high: float
    verdict: str


def noise_band(min_effect: float) -> tuple[float, float]:
    """The ratios B/A that count as the same."""
    return 1 / (1 + min_effect), 1 + min_effect


def decide(ci_low: float, ci_high: float, min_effect: float) -> str:
    """The verdict from the interval of B/A and the band (see the module's docstring)."""
    if not (math.isfinite(ci_low) and math.isfinite(ci_high) and 0 < ci_low <= ci_high):
        return TOO_FEW
    low, high = noise_band(min_effect)
    if low <= ci_low and ci_high <= high:
        return SAME
    if ci_high < low:
        return FASTER
    if ci_low > high:
        return SLOWER
    return UNDECIDED


def processes_of(cell) -> list[list[float]]:
    """A row's step samples as one list per process.

    A JSON list of lists is one list per process; a flat JSON list (a run
    made before repetition) is one process; anything else is none.
    """
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError:
            return []
    if not isinstance(cell, list) or not cell:
        return []
    if all(isinstance(x, list) for x in cell):
        return [[float(v) for v in x] for x in cell if x]
    if all(isinstance(x, int | float) for x in cell):
        return [[float(v) for v in cell]]
    return []


def compare_processes(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], min_effect: float,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """B's per-process samples against A's (same unit, positive): ratio, interval and verdict."""
    a = [list(p) for p in a if p]
    b = [list(p) for p in b if p]
    if any(x <= 0 for p in (*a, *b) for x in p):
        raise ValueError("step times must be positive")
    nan = float("nan")
    if not a or not b:
        return Comparison(len(a), len(b), nan, nan, nan, nan, nan, TOO_FEW)
    ratio, low, high = stats.ratio_interval(a, b, confidence)
    median_a = stats.process_summary(a, confidence)["median"]
    median_b = stats.process_summary(b, confidence)["median"]
    verdict = ONE_PROCESS if min(len(a), len(b)) < 2 else decide(low, high, min_effect)
    return Comparison(len(a), len(b), median_a, median_b, ratio, low, high, verdict)


def change_verdict(a: float, b: float, min_effect: float) -> str:
    """A GPU-time change (kernel or category, one profile a side): same inside the band, else its direction.

    nsys kernel time per category agrees within 1% between processes, so
    the band is the whole allowance; a zero difference is always same.
    """
    if not (math.isfinite(a) and math.isfinite(b)) or a < 0 or b < 0:
        return TOO_FEW
    if a == b:
        return SAME
    if a == 0:
        return "appeared"
    if b == 0:
        return "disappeared"
    low, high = noise_band(min_effect)
    ratio = b / a
    if low <= ratio <= high:
        return SAME
    return FASTER if ratio < 1 else SLOWER


def noise_of_study() -> Noise:
    """config.yaml's noise settings (noise.min_gpu_busy, noise.max_spread, compare.gpu_agreement,
    compare.gpu_min_effect, compare.compiled_agreement)."""
    from lmstudy.config import study_value

    return Noise(study_value("noise", "min_gpu_busy"), study_value("noise", "max_spread"),
                 study_value("compare", "gpu_agreement"), study_value("compare", "gpu_min_effect"),
                 study_value("compare", "compiled_agreement"))


def agreement_half_width(agreement: float, count_a: int, count_b: int) -> float:
    """The log half-width of B/A's interval of GPU time from the agreement of two single processes.

    `agreement` bounds one process against one other (95%); means of more processes agree closer,
    by sqrt((1/na + 1/nb) / 2).
    """
    return math.log1p(agreement) * math.sqrt((1 / count_a + 1 / count_b) / 2)


def kernels_verdict(a: float, b: float) -> str:
    """Kernels launched per step, A against B: equal or differs (not measured where a side lacks it)."""
    if not (isinstance(a, int | float) and isinstance(b, int | float)) or not (
            math.isfinite(a) and math.isfinite(b)):
        return TOO_FEW
    return EQUAL if a == b else DIFFERS


def reading(wall: str, gpu: str, kernels: str, host_bound: bool, noisy: bool, compiled: bool = False) -> str:
    """The three verdicts of a row in one line, e.g. "same GPU work, host time undecided: host-bound".

    Host-bound: the wall time measures the host's launches, so it is called host time; where the
    GPU's time decides and the host's does not agree with it, the line says the host hides it.
    Compiled: each run measured one compilation (lmstudy.analyse.compare.compiled).
    """
    if wall not in VERDICTS:
        return ""  # a row not compared: its verdict says why
    measured_gpu = gpu in (FASTER, SLOWER, SAME, UNDECIDED)
    words = "host time" if host_bound else "wall time"
    said = "not judged (one process)" if wall == ONE_PROCESS else wall
    if not measured_gpu:
        text = f"wall time {said} (no GPU time)"
    else:
        if gpu == SAME:
            first = {EQUAL: "same GPU work", DIFFERS: "same GPU time, other kernels"}.get(
                kernels, "same GPU time")
        else:
            first = f"GPU time {gpu}" + (", other kernels" if kernels == DIFFERS else "")
        text = f"{first}, {words} {said}"
        if gpu in (FASTER, SLOWER) and wall != gpu and host_bound:
            text += " (the host hides the GPU's change)"
    marks = [m for m, on in (("host-bound", host_bound), ("noisy", noisy),
                             ("one compilation a run", compiled)) if on]
    return text + (": " + ", ".join(marks) if marks else "")
