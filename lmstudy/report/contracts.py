"""The registered sections' contracts (lmstudy.report.contract.SectionContract), by name.

Apart from lmstudy.report.sections, which is only the list of names: reading NAMES
(the workflow at parse time, lmstudy.registry in a measuring job) must not reach
any section's report code, and lmstudy.code_version reads the import below as
reaching every section's section.py.
"""

from __future__ import annotations

import importlib

from lmstudy.report.sections import NAMES


def contract(name: str):
    """The registered section `name`'s contract (lmstudy.report.contract.SectionContract)."""
    if name not in NAMES:
        raise ValueError(f"no report section named {name!r}: the sections are {', '.join(NAMES)}")
    return importlib.import_module(f"lmstudy.report.sections.{name}.section").SECTION


def contracts(names=NAMES) -> list:
    """The contracts of `names`, in the registry's order (the report's)."""
    for name in names:
        contract(name)  # an unknown name stops here, named
    return [contract(name) for name in NAMES if name in set(names)]


def compared_products() -> dict[str, str]:
    """Every product the comparison of two runs reads, by key, in the registry's order."""
    products = {}
    for section in contracts():
        if section.compare is not None:
            products.update({key: section.products[key] for key in section.compare.reads})
    return products
