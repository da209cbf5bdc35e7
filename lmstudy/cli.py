"""What every script's entry point shares: a user's mistake is one sentence,
and the model-dimension arguments are spelled the same everywhere.

This module must not import torch at module level: the scripts parse their
arguments (and answer --help) before torch is imported.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile

from lmstudy.atomic import FULL, no_space_sentence
from lmstudy.errors import UserError

# The model's dimensions, as argparse names them (dest), in ModelSpec's order.
DIMENSIONS = ("d_model", "d_ff", "num_layers", "num_heads", "context_length", "batch_size", "vocab_size")
# Every field of lmstudy.measure.spec.ModelSpec.
MODEL_FIELDS = ("size", *DIMENSIONS, "precision", "device", "tf32", "memory_cap_gb")


def compile_from_scratch() -> None:
    """Make torch.compile pay its full cost here: no inductor cache warmed by an earlier run.

    Compile time is measured, and a warm cache would hide it. Call before
    torch is imported; child processes inherit it. What inductor and Triton
    still write (generated code, compiled kernels) goes to a folder of this
    job's own, removed when the job ends, instead of piling up in
    /tmp/torchinductor_<user>.
    """
    os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        cache = tempfile.mkdtemp(prefix="lmstudy-compile-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(cache, "triton"))
        # Inductor also keeps files under the temporary folder (precompiled
        # headers in <tmp>/torchinductor_<user>): that too is the job's own.
        os.environ["TMPDIR"] = cache
        tempfile.tempdir = None
        atexit.register(shutil.rmtree, cache, ignore_errors=True)


def run_main(main) -> None:
    try:
        main()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except OSError as error:
        # A full disk is the user's to fix, wherever the write was (a figure, a log).
        if error.errno not in FULL:
            raise
        print(f"error: {no_space_sentence(error.filename)}", file=sys.stderr)
        sys.exit(2)


def add_dimension_arguments(p: argparse.ArgumentParser) -> None:
    """The dimensions: --d-model ... --context-length (required), --batch-size, --vocab-size."""
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--d-ff", type=int, required=True)
    p.add_argument("--num-layers", type=int, required=True)
    p.add_argument("--num-heads", type=int, required=True)
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=10000)


def add_device_arguments(p: argparse.ArgumentParser, memory_cap_help: str | None = None) -> None:
    """--device, --tf32 and --memory-cap-gb."""
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 matrix products")
    p.add_argument("--memory-cap-gb", type=float, default=None, help=memory_cap_help)


def add_model_arguments(
    p: argparse.ArgumentParser, recorded_in: str = "rows", precision_default: str | None = None
) -> None:
    """The arguments of every ModelSpec field: --size, the dimensions, --precision and the device's.

    --precision is required unless `precision_default` is given.
    """
    p.add_argument("--size", required=True, help=f"the size's name, recorded in the {recorded_in}")
    add_dimension_arguments(p)
    if precision_default is None:
        p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], required=True)
    else:
        p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default=precision_default)
    add_device_arguments(p)


def dimension_kwargs(args: argparse.Namespace) -> dict:
    """The parsed dimensions, as keyword arguments of a spec."""
    return {name: getattr(args, name) for name in DIMENSIONS}


def model_kwargs(args: argparse.Namespace) -> dict:
    """The parsed ModelSpec fields (see add_model_arguments), as keyword arguments of a spec."""
    return {name: getattr(args, name) for name in MODEL_FIELDS}
