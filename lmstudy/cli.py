"""What every script's entry point shares: a user's mistake is one sentence."""

from __future__ import annotations

import sys

from lmstudy.devices import UserError


def run_main(main) -> None:
    try:
        main()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
