"""A profiler range around each module's forward and backward, named by the module's path, for any model.

Nsight Systems reads them as NVTX ranges and torch.profiler as
record_function, like the step's own ranges (lmstudy.measure.markers), so a
kernel is attributed to the innermost module that launched it, whatever the
model, in the forward and in the backward (the range inside the step's
"backward" range is the phase). Only modules down to `depth` dots in their
path get one (the root model has none: the step's phases are its ranges),
and only modules that are called (a ModuleList is not).

The forward range opens in a forward pre-hook and closes in the forward hook.
The backward range opens when autograd is about to run the node that made the
module's output (a pre-hook on the output's grad_fn: the module's last
operation is the first of its backward) and closes when the gradients of all
the module's tensor inputs (positional or keyword) are computed (a hook on each input
tensor). Nothing wraps the module's inputs or outputs (as
register_full_backward_hook does, whose identity Function breaks a
ReLU(inplace=True)): the model's autograd graph and its kernels stay what they
are. An input's gradient is complete once every use of it is done, so where a
module's input also feeds a module run before it (a residual path, a parallel
branch), its range ends with those too: ranges stay nested, and a kernel goes
to the innermost. A module whose inputs need no gradient (an embedding of
token ids) closes at the end of the backward.

Ranges are pushed and popped on the thread that runs the module: the caller's
for the forward (and for a CPU backward), autograd's device thread for a CUDA
backward. Each thread keeps its own stack, and nothing is ever left open:

- closing a range closes the ranges opened inside it that are still open;
- the end of each backward closes what that backward left open (an autograd
  final callback, on the backward's own thread);
- a step that raises (out of memory in a module's forward or backward) closes
  what it left open on its thread when `ModuleRanges.step` runs it, and, after
  a CUDA backward that raised, on autograd's thread too (through a one-node
  backward on that device);
- leaving `module_ranges` closes the rest.

So every NVTX push has its pop on its own thread, and every record_function
its exit.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import nvtx
import torch
from torch import nn

from lmstudy.ranges import NVTX_DOMAIN, module_range


def module_depth(path: str) -> int:
    return len(path.split(".")) if path else 0


class _Range:
    """One open range: its NVTX push and its record_function, closed once."""

    __slots__ = ("depth", "name", "node", "owner", "record")

    def __init__(self, name: str, owner: object, node: int | None = None, depth: int = 0):
        self.name, self.owner, self.node, self.depth = name, owner, node, depth
        nvtx.push_range(name, domain=NVTX_DOMAIN)
        self.record = torch.profiler.record_function(name)
        self.record.__enter__()

    def close(self) -> None:
        self.record.__exit__(None, None, None)
        nvtx.pop_range(domain=NVTX_DOMAIN)


class ModuleRanges:
    """The open ranges of every thread, and the operations that open and close them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stacks: dict[int, list[_Range]] = {}  # thread id -> its open ranges, innermost last
        self._backward_of: dict[int, int] = {}  # thread id -> the autograd graph task it last ran

    def _stack(self) -> list[_Range]:
        with self._lock:
            return self._stacks.setdefault(threading.get_ident(), [])

    def open(self, name: str, owner: object) -> None:
        self._stack().append(_Range(name, owner))

    def open_backward(self, name: str, owner: object, node: int, depth: int) -> None:
        """Open a module's backward range at autograd node `node`. Modules whose output is the same
        node (a model returning its final norm's output) open there at once: the outer one first."""
        stack = self._stack()
        inner = []
        while stack and stack[-1].node == node and stack[-1].depth > depth:
            inner.append(stack.pop())
            inner[-1].close()
        stack.append(_Range(name, owner, node, depth))
        stack.extend(_Range(r.name, r.owner, r.node, r.depth) for r in reversed(inner))

    def close(self, owner: object) -> None:
        """Close `owner`'s range on this thread and every range opened inside it; nothing if none is open."""
        stack = self._stack()
        if not any(r.owner is owner for r in stack):
            return
        while stack:
            done = stack.pop()
            done.close()
            if done.owner is owner:
                return

    def close_all(self) -> None:
        """Close every range open on this thread, innermost first."""
        stack = self._stack()
        while stack:
            stack.pop().close()

    def open_elsewhere(self) -> bool:
        """Whether a thread other than this one holds an open range."""
        me = threading.get_ident()
        with self._lock:
            return any(stack for thread, stack in self._stacks.items() if thread != me)

    def open_count(self) -> int:
        with self._lock:
            return sum(len(stack) for stack in self._stacks.values())

    def step(self, run: Callable, device: torch.device | None = None):
        """Run one step; whatever it raises, it leaves no range open (see the module's docstring)."""
        try:
            return run()
        except BaseException:
            self.close_all()
            if device is not None and device.type == "cuda" and self.open_elsewhere():
                self._close_on_autograd_thread(device)
            raise

    def _close_on_autograd_thread(self, device: torch.device) -> None:
        """Close what a failed CUDA backward left open on autograd's device thread: a one-node
        backward on `device` runs there, and its node's pre-hook closes that thread's ranges."""
        leaf = torch.zeros((), device=device, requires_grad=True)
        with torch.enable_grad():
            out = leaf * 1
        out.grad_fn.register_prehook(lambda grads: self.close_all())
        out.backward()

    # The hooks.

    def backward_started(self) -> None:
        """At a module's first backward node: a new backward first closes what an earlier one left
        open on this thread, and its end closes what it leaves open (an autograd final callback)."""
        thread, task = threading.get_ident(), torch._C._current_graph_task_id()
        if self._backward_of.get(thread) != task:
            self._backward_of[thread] = task
            self.close_all()
            torch.autograd.Variable._execution_engine.queue_callback(self.close_all)


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    logits = getattr(value, "logits", None)  # a Hugging Face output object
    return [logits] if isinstance(logits, torch.Tensor) else []


def _hooks(ranges: ModuleRanges, name: str, depth: int, backward: bool):
    """The forward pre-hook and hook of one module."""
    # One owner per call of the module (a module called twice per step has two ranges of its name).
    calls: list[object] = []

    def before(module, args, kwargs):
        if torch.compiler.is_compiling():
            return None
        call = object()
        calls.append(call)
        ranges.open(name, call)
        if not backward or not torch.is_grad_enabled():
            return None
        # The backward range closes once the gradient of each of the inputs is computed: a hook on
        # each input tensor, which leaves the tensors (and the model's autograd graph) as they were.
        inputs = list({id(t): t for t in _tensors((args, kwargs)) if t.requires_grad}.values())
        waiting = [len(inputs)]

        def input_ready(grad):
            waiting[0] -= 1
            if waiting[0] == 0:
                ranges.close(call)

        for tensor in inputs:
            tensor.register_hook(input_ready)
        return None

    def after(module, args, kwargs, output):
        if torch.compiler.is_compiling() or not calls:
            return
        call = calls.pop()
        ranges.close(call)
        if not backward or not torch.is_grad_enabled():
            return
        inputs = {id(t) for t in _tensors((args, kwargs))}
        nodes = {t.grad_fn for t in _tensors(output)
                 if t.requires_grad and t.grad_fn is not None and id(t) not in inputs}
        opened = []

        def opener(node):
            def open_backward(grad_outputs):
                if not opened:  # the first of the module's outputs that autograd reaches
                    opened.append(True)
                    ranges.backward_started()
                    ranges.open_backward(name, call, id(node), depth)

            return open_backward

        for node in nodes:
            node.register_prehook(opener(node))

    return before, after


@contextlib.contextmanager
def module_ranges(model: nn.Module, depth: int, backward: bool = True):
    """Within the block, each called module whose path has at most `depth` parts opens a range around
    its forward and (with `backward`) its backward. Yields the ModuleRanges: run each step through
    its `step` so that a step that raises leaves no range open."""
    ranges = ModuleRanges()
    handles = []
    for path, module in model.named_modules():
        if 0 < module_depth(path) <= depth:
            before, after = _hooks(ranges, module_range(path), module_depth(path), backward)
            handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
            handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        yield ranges
    finally:
        for handle in handles:
            handle.remove()
        ranges.close_all()
