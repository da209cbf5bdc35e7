"""Answers to the course's questions, and the report's summary gathered from them.

A section answers each question the course asks of it in one to three computed
sentences, linked to the table or figure the numbers come from; its findings
(what is not an answer) stay below. An answer may carry a headline: the short
sentence, with its number and how far to trust it, that the report's summary
at the top shows. Where a section lacks the data for an answer, the answer
says why in one sentence, so a reader never looks for a question in vain.

No torch, no matplotlib: the sections' answers modules build these from tables.
"""

from __future__ import annotations

import dataclasses
import math
import numbers


@dataclasses.dataclass
class Answer:
    question: str  # the course's label and question in a few words: "(b) Forward and backward time"
    text: str  # one to three computed sentences with the numbers
    # What the numbers come from: a table's name (its CSV's, "timing_step_time") or a figure's
    # file name ("latency.png") in the same section; "" when the answer stands on its text.
    source: str = ""
    headline: str = ""  # the summary's sentence; "" keeps the answer out of the summary
    trust: str = ""  # how far to trust the headline's number, computed ("±2% between processes")
    href: str = ""  # the source's anchor in the page, set when rendering ("" if not found)
    section: str = ""  # the key of the section that gave it, set when rendering


@dataclasses.dataclass
class Answers:
    items: list[Answer]


def table_anchor(name: str) -> str:
    return f"table-{name}"


def figure_anchor(section: str, file_name: str) -> str:
    return f"figure-{section}-{file_name.rsplit('.', 1)[0]}"


def summary(sections) -> list[Answer]:
    """The headlines of every section's answers, in the report's order."""
    return [
        answer
        for section in sections
        for block in section.blocks
        if isinstance(block, Answers)
        for answer in block.items
        if answer.headline
    ]


def percent(fraction: float) -> str:
    """A share or a relative difference as a reader wants it: 0.4%, 12%, never 0.000%."""
    value = abs(fraction) * 100
    if value == 0:
        return "0%"
    if value < 0.1:
        return "<0.1%"
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def span(low: float, high: float, fmt: str = ".2f", unit: str = "") -> str:
    """'1.8–2.1×', or one number when both ends print the same."""
    a, b = f"{low:{fmt}}", f"{high:{fmt}}"
    return f"{a}{unit}" if a == b else f"{a}–{b}{unit}"


def between(low: float, high: float, fmt: str = ".2f", unit: str = "") -> str:
    """'1.8 to 2.1 ms' in a sentence, or '2.1 ms' when both ends print the same (never '2 to 2'); a
    unit written onto the number ('×') goes on both ends: '1.00× to 1.20×'."""
    a, b = f"{low:{fmt}}", f"{high:{fmt}}"
    if a == b:
        return f"{a}{unit}"
    return f"{a} to {b}{unit}" if unit.startswith(" ") or not unit else f"{a}{unit} to {b}{unit}"


def processes_text(processes) -> str:
    """How many fresh processes measured each row: '2 fresh processes', '2 to 4 fresh processes'; a run
    that recorded no count (an older run, a column it lacks) says so rather than guess one."""
    known = [p for p in processes if isinstance(p, numbers.Real) and not math.isnan(p)]
    if not known:
        return "fresh processes (their number not recorded in this run)"
    low, high = int(min(known)), int(max(known))
    return f"{between(low, high, 'd')} fresh process{'' if low == high == 1 else 'es'}"


def of_all(part: int, whole: int, word: str) -> str:
    """'2 of 5 configurations', 'all 3 configurations', 'both configurations', 'the one configuration':
    never 'in 1 of 1 configurations'."""
    if part == whole:
        return (f"the one {word}" if whole == 1 else f"both {word}s" if whole == 2
                else f"all {whole} {word}s")
    return f"{part} of {whole} {word}s"


def count(n: int, word: str) -> str:
    """'1 configuration', '3 configurations': never '1 configuration(s)'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def significant(number: float, digits: int = 3) -> str:
    """`number` to `digits` significant digits, trailing zeros kept (0.170, 1.37, 129, 3,410): for a
    count whose column spans sizes a column-wide precision would round to 0 (a 0.17 M model beside
    a 129 M one)."""
    if not number or not math.isfinite(number):
        return f"{number:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(number))))
    return f"{number:,.{decimals}f}"
