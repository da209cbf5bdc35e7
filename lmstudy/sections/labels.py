"""How every section names the passes and words a speed ratio."""

from __future__ import annotations

PASS_LABELS = {
    "forward": "forward",
    "forward_backward": "forward+backward",
    "train_step": "training step",
}


def faster(ratio: float) -> str:
    """A time ratio (old / new) in words: '2.10× faster' or '1.25× slower'."""
    return f"{ratio:.2f}× faster" if ratio >= 1 else f"{1 / ratio:.2f}× slower"
