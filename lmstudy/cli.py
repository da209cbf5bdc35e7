"""What every entry point shares: a user's mistake is one sentence, a spec is read one way.

This module must not import torch at module level: the scripts parse their
arguments (and answer --help) before torch is imported.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import faulthandler
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from lmstudy.atomic import FULL, no_space_sentence
from lmstudy.errors import UserError
from lmstudy.job_process import DUMP_SIGNAL, own_torch_scratch
from lmstudy.model_choice import ModelChoice


def compile_from_scratch() -> None:
    """Make torch.compile pay its full cost in the job's first measuring process, and only there.

    Compile time is measured, and a cache warmed by an earlier job or run
    would hide it: the job gets an empty inductor and Triton cache of its own
    (removed when it ends), so its first process compiles from scratch. The
    job's later processes (lmstudy.measure.repeat: fresh processes until they
    agree) find what the first compiled there and measure the steps, not the
    compiler, a second time. Call before torch.compile runs; child processes
    inherit it.
    """
    scratch = own_torch_scratch()
    folder = tempfile.mkdtemp(prefix="compile-", dir=scratch)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    os.environ.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    if "torch._inductor.config" in sys.modules:  # imported already (a job server's job): set it there too
        sys.modules["torch._inductor.config"].force_disable_caches = False
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(remove)
    # Inductor also keeps files under the temporary folder (precompiled headers in
    # <tmp>/torchinductor_<user>): that too is the job's own.
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = None


def run_main(main) -> None:
    """Run a script's `main`: a user's mistake or a full disk in one line (exit 2), and torch's
    scratch files in a folder removed at exit, also when the job is cancelled (SIGTERM)."""
    own_torch_scratch()
    # Where the job is when its wrapper stops it at its time limit (lmstudy.launch.watch): every
    # thread's stack, to the log. A signal handler of C, no thread: nothing runs until it comes.
    with contextlib.suppress(ValueError, AttributeError):  # not the main thread; not POSIX
        faulthandler.register(DUMP_SIGNAL, all_threads=True)
    # Python's default SIGTERM ends the process without exit handlers: the folder would stay.
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        main()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except OSError as error:
        # A full disk is the user's to fix, wherever the write was (a figure, a log); so is a file-size
        # limit (Python ignores SIGXFSZ: the write fails with EFBIG).
        if error.errno == errno.EFBIG:
            where = f" to write {error.filename}" if error.filename else ""
            print(f"error: the file-size limit of this shell (ulimit -f) is too small{where}: raise it "
                  "(ulimit -f unlimited) and run the same command again.", file=sys.stderr)
            sys.exit(2)
        if error.errno not in FULL:
            raise
        print(f"error: {no_space_sentence(error.filename)}", file=sys.stderr)
        sys.exit(2)


def _exit_on_sigterm(number, _frame) -> None:
    sys.exit(128 + number)


def memory_cap(text: str) -> float:
    """--memory-cap-gb: a finite number of GB above 0 (NaN would pass every comparison as no cap)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of GB above 0")
    return value


def model_choice(text: str) -> ModelChoice:
    """--model's JSON (lmstudy.model_choice.ModelChoice's fields), or argparse's error naming it."""
    try:
        return ModelChoice.coerce(json.loads(text))
    except (ValueError, TypeError) as error:
        raise argparse.ArgumentTypeError(f"not a model choice ({error}): {text!r}") from None


def _object_once(pairs: list) -> dict:
    """A JSON object whose keys are each written once (json keeps the last of two without a word)."""
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise UserError(f"the key {key!r} is written twice in one object, and only the last would count: "
                            "remove one of them.")
        seen[key] = value
    return seen


def _no_constant(name: str):
    raise UserError(f"{name} is not a value any setting takes: give a finite number.")


def spec_from_text(text: str, option: str = "--spec") -> dict:
    """A spec as given: a JSON object, or a JSON file; a user's mistake in one sentence."""
    from lmstudy.config import ConfigError, check_size

    if not text.lstrip().startswith("{"):
        try:
            text = Path(text).read_text()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or "not text"
            raise UserError(
                f"{option}: {text!r} is neither a JSON object nor a readable file ({reason})."
            ) from None
    try:
        given = json.loads(text, object_pairs_hook=_object_once, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise UserError(f"{option}: not JSON ({error}): give a JSON object or a JSON file.") from None
    except UserError as error:
        raise UserError(f"{option}: {error}") from None
    except RecursionError:
        raise _too_big(option) from None
    if not isinstance(given, dict):
        raise UserError(f"{option}: must be a JSON object of the job's settings.")
    try:
        check_size(given)
    except ConfigError:
        raise _too_big(option) from None
    return given


def _too_big(option: str) -> UserError:
    return UserError(
        f"{option}: nests far deeper or holds far more values than any job's settings: give the job's "
        "spec as `lmstudy spec` prints it."
    )


def complete_spec(job: str, given: dict, configfile: Path, preset: str | None = None) -> dict:
    """A partial spec made whole, as the workflow would build it: what `given` lacks comes from
    `configfile` (under `preset`, default its own). For `lmstudy spec`; a job never does this."""
    from lmstudy import config as study_config
    from lmstudy.job_spec import check_spec, job_spec, wildcards_of

    _check_names_its_configuration(job, given)
    wildcards = wildcards_of(job, given)
    # its values as the config's schema takes them; a model (its factory alone, or some of config
    # model:'s keys) is completed from the config file first and checked whole below
    check_spec(job, {k: v for k, v in given.items() if k != "model"})
    base = _read_study_settings(configfile)
    if preset:
        base["preset"] = preset
    _add_a_size_of_its_own(base, given, configfile)
    given = dict(given)
    model = _lay_model_over(base, given.pop("model", None))
    schema = Path(__file__).resolve().parent.parent / "workflow/schemas/config.schema.yaml"
    try:
        config = study_config.load(base, schema)
    except study_config.ConfigError as error:
        raise UserError(f"{configfile}: {error}") from None
    built = job_spec(config, job, wildcards)
    _check_keys_known(job, given, built)
    spec = {**built, **given}
    if model is not None and "model" in spec:
        spec["model"] = {**spec["model"], **model}
    check_spec(job, spec)
    return spec


def _check_names_its_configuration(job: str, given: dict) -> None:
    """The spec names the job's configuration (its wildcards' values), which no config file gives."""
    from lmstudy import registry
    from lmstudy.job_spec import WILDCARD_KEYS

    named = [WILDCARD_KEYS.get(w, w) for w in registry.job(job).wildcards]
    missing = [key for key in named if key not in given]
    if missing:
        raise UserError(
            f"the spec must name {', '.join(missing)} (the job's configuration): add "
            f"{' '.join(f'{key}=...' for key in missing)}."
        )


def _read_study_settings(configfile: Path) -> dict:
    """The study's settings in `configfile`, as written (no preset applied yet)."""
    import yaml

    try:
        base = yaml.safe_load(configfile.read_text())
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not text"
        raise UserError(f"--configfile: cannot read {str(configfile)!r} ({reason}).") from None
    except yaml.YAMLError as error:
        said = " ".join(str(error).split())
        raise UserError(f"--configfile: {configfile} is not valid YAML ({said}).") from None
    if not isinstance(base, dict):
        raise UserError(f"--configfile: {configfile} must hold the study's settings, as config.yaml does.")
    return base


def _add_a_size_of_its_own(base: dict, given: dict, configfile: Path) -> None:
    """A size the config (under its preset) does not know is the spec's own: its dimensions, which the
    spec must then give, are added to `base`'s sizes."""
    from lmstudy import config as study_config

    dims = ("d_model", "d_ff", "num_layers", "num_heads")
    try:
        sizes = study_config.apply_preset(base).get("sizes") or {}  # the preset's sizes too
    except study_config.ConfigError as error:
        raise UserError(f"{configfile}: {error}") from None
    if "size" in given and given["size"] not in sizes:
        if not set(dims) <= set(given):
            known = ", ".join(sizes) or "none"
            raise UserError(
                f"no size {given['size']} in {configfile}: the sizes are {known}; or give the size's "
                f"{', '.join(k for k in dims if k not in given)} too."
            )
        base.setdefault("sizes", {})[given["size"]] = {k: given[k] for k in dims}


def _lay_model_over(base: dict, model) -> dict | None:
    """The spec's model as config model:'s keys (a factory's name alone: {"factory": name}), laid over
    `base`'s model (a size's extra keys aside); None where the spec names no model."""
    if isinstance(model, str):  # a factory alone: "path/to/file.py:build"
        model = {"factory": model}
    if isinstance(model, dict):
        base["model"] = {**base.get("model", {}), **{k: v for k, v in model.items() if k != "extra"}}
    elif model is not None:
        raise UserError("the spec's model must be a JSON object (config model:'s keys) or a factory's name.")
    return model


def _check_keys_known(job: str, given: dict, built: dict) -> None:
    """Every key the spec gives is one of the job's spec, or the error names the closest."""
    import difflib

    for key in given:
        if key not in built:
            close = difflib.get_close_matches(key, built, n=1)
            hint = f"did you mean {close[0]}?" if close else f"its keys are {', '.join(sorted(built))}."
            raise UserError(f"the spec of job {job} has no key {key}; {hint}")
