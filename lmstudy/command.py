"""The study's command: `lmstudy measure <job> --spec ...` and `lmstudy spec <job> key=value ...`.

Installed as the console script `lmstudy` (pip install -e .); from a clone,
`python -m lmstudy`. Every measuring rule of the workflow runs `lmstudy measure`,
which looks the job up in the sections' registry (lmstudy.registry) and runs
its runner on the spec exactly as given: a job reads nothing but its spec and
its input files. `lmstudy spec` completes a partial spec by hand from a
config file, as the workflow builds them.

Torch-free until the job's runner is imported: --help and a user's mistake
cost no torch import, and the measuring job's imports happen before its
phase clock starts (lmstudy.phases).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lmstudy import cli, job_spec, registry
from lmstudy.errors import IncompleteSpec, UserError


def _path_options(job: registry.Job) -> list[tuple[str, str, bool]]:
    """The job's path options: (dest, help, required)."""
    return [(name.rstrip("?"), text, not name.endswith("?")) for name, text in job.paths]


def _summary(section: str, doc: str) -> str:
    """A job's line in `lmstudy measure --help`: its section, and what its runner's docstring says first
    (up to its first colon, semicolon or parenthesis), so that two jobs of a section read apart."""
    import re

    said = re.split(r"(?<=[a-z)])[:;]| \(", " ".join(doc.split()), maxsplit=1)[0].rstrip(".")
    return f"{section}: {said[:1].lower()}{said[1:]}" if said else f"the {section} section's job"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lmstudy", description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True, metavar="{measure,spec}")
    measure = commands.add_parser(
        "measure", help="run one measuring job on a complete spec",
        description="Run one measuring job on its complete spec (the workflow's jobs do; "
        "`lmstudy spec` completes a partial one).",
    )
    jobs = measure.add_subparsers(dest="job", required=True, metavar="JOB")
    for name, job in registry.jobs().items():
        runner_doc = job.load_runner().__doc__ or ""
        sub = jobs.add_parser(name, help=_summary(job.section, runner_doc), description=runner_doc.strip())
        sub.add_argument("--spec", required=True,
                         help="the job's complete settings: a JSON object, or a JSON file")
        for dest, text, required in _path_options(job):
            sub.add_argument(f"--{dest.replace('_', '-')}", dest=dest, type=Path, required=required,
                             help=text if required else f"{text} (optional)")
        sub.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    spec = commands.add_parser(
        "spec", help="complete a partial spec from a config file, as the workflow would",
        description="Print a job's complete spec: KEY=VALUE settings (VALUE read as YAML: 128, bf16, "
        "[1, 2]) and --spec's, completed from the config file as the workflow builds its jobs' specs.",
    )
    spec.add_argument("job", metavar="JOB", help=f"one of: {', '.join(registry.jobs())}")
    spec.add_argument("settings", nargs="*", metavar="KEY=VALUE")
    spec.add_argument("--spec", help="settings as a JSON object or file, under the KEY=VALUE ones")
    spec.add_argument("--configfile", type=Path, default=Path("config.yaml"),
                      help="the study's config (default: ./config.yaml)")
    spec.add_argument("--preset", help="its preset to apply (default: the config's own)")
    return p


def _settings(pairs: list[str]) -> dict:
    import yaml

    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"{pair!r}: write each setting as KEY=VALUE, e.g. size=small.")
        if key in settings:
            raise UserError(f"{key} is set twice ({key}={settings[key]!r} and {pair}): keep one of them.")
        try:
            settings[key] = yaml.safe_load(value)
        except yaml.YAMLError as error:
            problem = getattr(error, "problem", None) or "not valid YAML"
            raise UserError(
                f"{pair!r}: its value is not YAML ({problem}): quote it, e.g. {key}='\"{value}\"', or write "
                "a list as [1, 2]."
            ) from None
    return settings


def _job(name: str) -> registry.Job:
    """The job `name`; an unknown one in one sentence that names the jobs there are."""
    try:
        return registry.job(name)
    except ValueError as error:
        raise UserError(f"{error}.") from None


def _print_spec(args: argparse.Namespace) -> None:
    _job(args.job)
    given = {**(cli.spec_from_text(args.spec) if args.spec else {}), **_settings(args.settings)}
    json.dump(cli.complete_spec(args.job, given, args.configfile, args.preset), sys.stdout,
              indent=2, sort_keys=True)
    print()


def _check_paths(job: registry.Job, args: argparse.Namespace) -> None:
    """A file option given a folder, said before the measurement rather than after it."""
    for dest in [d for d, _, _ in _path_options(job)] + ["phases"]:
        path = getattr(args, dest)
        if path is not None and not dest.endswith("_dir") and path.is_dir():
            option = f"--{dest.replace('_', '-')}"
            raise UserError(f"{option}: {path} is a folder: give the path of a file (in it, or beside it).")


def _measure(args: argparse.Namespace) -> None:
    job = _job(args.job)
    spec = cli.spec_from_text(args.spec)
    job_spec.check_spec(args.job, spec)
    _check_paths(job, args)
    if job.compiles:
        cli.compile_from_scratch()
    if job.forks:  # it must not start the CUDA driver nor run the user's model code: NVML answers here
        from lmstudy.measure.fresh_process import mark_forking_parent

        mark_forking_parent()
    runner = job.load_runner()
    paths = {dest: getattr(args, dest) for dest, _, _ in _path_options(job)}

    def run() -> None:
        try:
            clock = runner(spec, paths)
        except IncompleteSpec as error:
            raise IncompleteSpec(error.missing, args.job) from None
        except KeyError as error:
            # a runner reads a setting before it builds its spec: a key the spec lacks, said as such
            key = error.args[0] if error.args else None
            if not isinstance(key, str) or key in spec:
                raise
            raise IncompleteSpec([key], args.job) from None
        if args.phases and clock is not None:
            clock.write(args.phases)

    from lmstudy.measure import fresh_process

    # What the job's processes start and leave running (a model's workers, a daemon) ends with the job,
    # named in its log: orphans come to this process (a subreaper), not to init.
    fresh_process.become_subreaper()
    try:
        if job.forks:
            # A user's model: its code imported once, in a child that runs the job where that is safe;
            # a measuring process that it ends, crashes or forks is told in one sentence naming it.
            from lmstudy.measure.model_process import run_with_model_imported, users_model

            choice = users_model(spec)
            fresh_process.MODEL_FACTORY = choice.factory if choice else None
            if job.model_process and run_with_model_imported(run, spec):
                return
        run()
    finally:
        fresh_process.end_left_processes(f"the {args.job} job")


def main(argv=None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "spec":
        _print_spec(args)
    else:
        _measure(args)


def run() -> None:
    """The console script's entry point."""
    cli.run_main(main)
