#!/usr/bin/env python
"""Settle section 2's profiler where the profile jobs run, once, before them.

nsys.backend `nsys` must find a working Nsight Systems (else one sentence
naming nsys.executable); `torch` uses torch.profiler; `auto` takes nsys where
it runs, else torch.profiler, and says how to get nsys. The answer, a JSON
record, is what every profile job of the run reads:

    python scripts/nsys_backend.py --out results/default/nsys/backend.json \\
        --spec '{"backend": "auto", "executable": "nsys", "device": "cuda"}'
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import add_spec_arguments, read_spec, run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_arguments(p, "nsys_backend")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    spec = read_spec(args, "nsys_backend")
    from lmstudy.atomic import write_json
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.executable import NsysMissing, describe, settle_backend

    try:
        answer = settle_backend(spec["backend"], spec["executable"], spec["device"], record=str(args.out))
    except NsysMissing as error:
        raise UserError(str(error)) from None
    print(describe(answer), flush=True)
    write_json(args.out, answer)


if __name__ == "__main__":
    run_main(main)
