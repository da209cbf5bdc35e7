"""The snapshot job: one step of one configuration, recorded on a GPU.

Build the model, run the warm-up steps, note where the parameters, optimizer
state, gradients and inputs live, reset the allocator's peak, then record
one step with ``_record_memory_history(stacks="python")`` and dump the
snapshot. The step functions mark forward, backward and optimizer
(lmstudy.measure.markers), and the allocator records those marks in the snapshot.
Beside the snapshot the job writes its metadata: the configuration,
``torch.cuda.max_memory_allocated()`` over the recorded step, the tensors'
addresses, the dtype of the residual stream as observed, and provenance.

Out of memory (building, warming up or in the recorded step) is a result:
the snapshot is dumped as it stands (with the trace up to the failure when
recording had begun) and the metadata says status OOM and at which stage.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from lmstudy.atomic import atomic_path
from lmstudy.errors import UserError
from lmstudy.measure.device_clock import now, synchronize
from lmstudy.measure.devices import free_memory, open_device, out_of_memory_is_a_result
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import Workload, make_step
from lmstudy.phases import PhaseClock

PASSES = ("forward", "train_step")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SnapshotSpec(ModelSpec):
    # No defaults: config.yaml's memory:, through the job's spec (lmstudy.job_spec).
    pass_name: str
    warmup_steps: int
    max_entries: int
    # "python": Python frames only; "all": C++ frames too, which name the autograd operation
    # (MmBackward0, ...) behind each block the backward allocates, at a slower capture.
    stacks: str

    def describe(self) -> dict:
        row = dataclasses.asdict(self)
        row["pass"] = row.pop("pass_name")
        row["model"] = self.model.label
        return row


def _pointers(tensors) -> list[int]:
    return [t.data_ptr() for t in tensors if isinstance(t, torch.Tensor) and t.is_cuda]


def _optimizer_tensors(optimizer) -> list[torch.Tensor]:
    if optimizer is None:
        return []
    return [v for state in optimizer.state.values() for v in state.values()]


def _grads(model) -> list[torch.Tensor]:
    return [p.grad for p in model.parameters() if p.grad is not None]


def _observe_residual_dtype(model, step) -> str:
    """Run `step` once, noting the dtype of the first block's output."""
    seen = []
    if not hasattr(model, "layers"):
        return ""  # a model of the user's own: which module carries the residual stream is not known
    handle = model.layers[0].register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    try:
        step()
    finally:
        handle.remove()
    return str(seen[0]).removeprefix("torch.") if seen else ""


def _open_snapshot_device(spec: SnapshotSpec, clock: PhaseClock) -> tuple[torch.device, dict]:
    """Refuse a spec no snapshot can be taken of (a pass not in PASSES, a device other than CUDA) in
    one sentence, then open the device: the device and the metadata's first fields (the
    configuration, the device's environment, its index, the model's parameter count).

    The clock's "start" phase runs from before the checks to the end.
    """
    started = now(None)  # no device yet
    if spec.pass_name not in PASSES:
        raise UserError(f"pass must be one of {PASSES} for a memory snapshot, not {spec.pass_name!r}.")
    if spec.device != "cuda":
        raise UserError(
            "memory snapshots need a CUDA GPU (the caching allocator records them): "
            "run this job with --device cuda on a GPU machine."
        )
    device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    meta = {**spec.describe(), **env}
    meta["device_index"] = torch.cuda.current_device()
    meta["params"] = spec.parameter_count()
    clock.add("start", now(device) - started)
    return device, meta


def _tensor_addresses_before(work: Workload) -> dict[str, list[int]]:
    """Where the parameters, optimizer state, gradients and inputs live after the warm-up: the analysis
    tells the snapshot's blocks apart by these addresses."""
    return {
        "parameters": _pointers(work.model.parameters()),
        "optimizer_state": _pointers(_optimizer_tensors(work.optimizer)),
        "gradients_before": _pointers(_grads(work.model)),
        "inputs": _pointers([work.inputs, work.targets]),
    }


def _dump_snapshot_and_stop(snapshot_path: str | Path, recording: bool, meta: dict) -> None:
    """Dump the allocator's snapshot into `snapshot_path` where the step was recorded or ran out of
    memory (the snapshot as it stands, with the trace up to the failure once recording had begun),
    then stop recording where it had begun."""
    if recording or meta.get("status") == "OOM":
        with atomic_path(snapshot_path) as tmp:
            torch.cuda.memory._dump_snapshot(str(tmp))
    if recording:
        torch.cuda.memory._record_memory_history(enabled=None)


def capture(spec: SnapshotSpec, snapshot_path: str | Path, clock: PhaseClock | None = None) -> dict:
    """Record the snapshot into `snapshot_path`; return the metadata.

    `clock` gets the phases: start, build, measure (warm-up and the
    recorded step) and profile (dumping the snapshot).
    """
    clock = clock or PhaseClock()
    device, meta = _open_snapshot_device(spec, clock)
    stage, recording, work, step = "build", False, None, None
    started = now(device)
    try:
        with out_of_memory_is_a_result() as oom:
            work = spec.build_workload(device, with_optimizer=spec.pass_name == "train_step")
            step = make_step(work, spec.pass_name)
            built = now(device)
            clock.add("build", built - started)
            started = built
            stage = "warm-up"
            meta["residual_dtype"] = _observe_residual_dtype(work.model, step)
            for _ in range(spec.warmup_steps - 1):
                step()
            synchronize(device)  # not a timer: the warm-up's memory is all in place before it is noted
            meta["tensors"] = _tensor_addresses_before(work)
            torch.cuda.reset_peak_memory_stats(device)
            meta["memory_allocated_before"] = torch.cuda.memory_allocated(device)
            stage = "recorded step"
            torch.cuda.memory._record_memory_history(max_entries=spec.max_entries, stacks=spec.stacks)
            recording = True
            step()
            synchronize(device)  # not a timer: the recorded step's memory is all in place before it is noted
            meta["tensors"]["gradients_after"] = _pointers(_grads(work.model))
            meta["tensors"]["optimizer_state_after"] = _pointers(_optimizer_tensors(work.optimizer))
            meta.update(status="ok", stage="done", error="")
        if oom:
            meta.update(oom.fields(), stage=stage)
    finally:
        # The recorded step has synchronized, or failed (waiting on the device then could raise again).
        ended = now(None)
        clock.add("build" if stage == "build" else "measure", ended - started)
        started = ended
        _dump_snapshot_and_stop(snapshot_path, recording, meta)
    meta["max_memory_allocated"] = torch.cuda.max_memory_allocated(device)
    meta["memory_allocated_after"] = torch.cuda.memory_allocated(device)
    meta["recorded"] = recording
    clock.add("profile", now(device) - started)
    del work, step
    free_memory(device)
    return meta
