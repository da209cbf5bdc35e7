"""The registered sections' contracts (lmstudy.report.contract.SectionContract), by name.

Whoever renders the report or the comparison (the report and compare commands) takes the
contracts here and hands them to lmstudy.report, which never imports a section.
lmstudy.code_version reads the import below as reaching every section's section.py.
"""

from __future__ import annotations

import importlib

from lmstudy.registry import NAMES


def contract(name: str):
    """The registered section `name`'s contract (lmstudy.report.contract.SectionContract)."""
    if name not in NAMES:
        raise ValueError(f"no report section named {name!r}: the sections are {', '.join(NAMES)}")
    return importlib.import_module(f"lmstudy.sections.{name}.section").SECTION


def contracts(names=NAMES) -> list:
    """The contracts of `names`, in the registry's order (the report's)."""
    for name in names:
        contract(name)  # an unknown name stops here, named
    return [contract(name) for name in NAMES if name in set(names)]
