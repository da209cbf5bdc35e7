"""`python -m lmstudy <command>` (and the console script `lmstudy`): one entry point for the study.

- `measure` and `spec`: the measuring jobs (lmstudy.command);
- the CPU side's commands, each a module of lmstudy.commands: what the workflow's aggregating,
  figure, report and comparison rules run, and a person runs by hand.

Torch-free: a command imports only what it runs.
"""

from __future__ import annotations

import importlib
import sys

# The CPU side's commands, each lmstudy/commands/<name>.py with main(argv).
COMMANDS = (
    "aggregate",
    "aggregate_nsys",
    "ladder_table",
    "memory_summary",
    "memory_table",
    "nsys_kernels",
    "make_figures",
    "render_report",
    "compare_runs",
    "study_cost",
)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        command = importlib.import_module(f"lmstudy.commands.{argv[0]}")
        command.main(argv[1:])
        return
    from lmstudy import command

    if not argv or argv[0] in ("-h", "--help"):
        command._parser().print_help()
        print(f"\nthe CPU side's commands (python -m lmstudy <command> --help): {', '.join(COMMANDS)}")
        return
    command.main(argv)


def run() -> None:
    """The console script's entry point: a user's mistake in one line (lmstudy.cli.run_main)."""
    from lmstudy.cli import run_main

    run_main(main)
