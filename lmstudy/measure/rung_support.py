"""Whether a rung of the ladder can run on this device: a rung that cannot is a result, not a failure.

A CPU has no CUDA graphs and no flash or cuDNN attention; a machine without
a C++ compiler (or Triton) cannot run torch.compile. Such a rung is a row
with status "unsupported" and the reason in one sentence, as an
out-of-memory rung is a row with status "OOM" (lmstudy.measure.devices): the study
goes on, and the report says which rungs could not run and why.

Where it is knowable before building anything (the device's type), it is
decided up front (`unsupported_here`); the backend's own refusal is the last
resort (`unsupported_is_a_result`), and only a refusal: an error that does
not say so is raised as it is.
"""

from __future__ import annotations

import contextlib
import re

from lmstudy.ladder_rungs import Rung

# What a backend's refusal says (lowercased). Narrow on purpose: an error
# that is a bug must fail the job, never be recorded as "unsupported".
REFUSALS = re.compile(
    r"not supported|unsupported|not available|no working c\+\+ compiler|"
    r"cannot find a working triton|no kernel image is available|of supported devices"
)


def unsupported_here(rung: Rung, device_type: str) -> str | None:
    """Why `rung` cannot run on a device of `device_type` ('cuda', 'cpu'), or None if it may."""
    if device_type == "cuda":
        return None
    if rung.compile_mode == "reduce-overhead":
        return (f"CUDA graphs (torch.compile mode reduce-overhead) need a CUDA device, and this run is "
                f"on {device_type}.")
    if rung.sdpa_backend and rung.sdpa_backend != "math":
        return (f"forcing SDPA's {rung.sdpa_backend} backend applies to CUDA only, and this run is on "
                f"{device_type}.")
    return None


def refusal(error: BaseException) -> str | None:
    """The reason, in one sentence, when `error` is a backend refusing the rung; None for anything else.

    Only a RuntimeError (torch's errors, torch._dynamo's and inductor's among
    them) whose message says unsupported or not available counts.
    """
    if not isinstance(error, RuntimeError):
        return None
    inner = getattr(error, "inner_exception", None)  # inductor's BackendCompilerFailed wraps the cause
    texts = [str(error)] + ([str(inner)] if inner is not None else [])
    for text in texts:
        for line in text.splitlines():
            if REFUSALS.search(line.lower()):
                line = line.strip()[:300].rstrip(".")
                return f"the backend refused it ({type(error).__name__}): {line}."
    return None


class Unsupported:
    """What an `unsupported_is_a_result` block ran into: nothing (false), or a refusal."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def __bool__(self) -> bool:
        return self.reason is not None

    def fields(self) -> dict:
        """The columns of an unsupported result: status unsupported and the reason."""
        return {"status": "unsupported", "reason": self.reason}


@contextlib.contextmanager
def unsupported_is_a_result():
    """Run the block; a backend's refusal (`refusal`) ends it as a result, anything else is raised."""
    caught = Unsupported()
    try:
        yield caught
    except RuntimeError as error:
        reason = refusal(error)
        if reason is None:
            raise
        caught.reason = reason
