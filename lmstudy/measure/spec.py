"""The model configuration every measuring job shares: sizes, precision, device.

Each section's spec (TimingSpec, ProfileSpec, SnapshotSpec, CompileSpec)
extends ModelSpec with its own fields, keyword-only. No field has a default:
config.yaml and its schema hold them, and a job's spec (lmstudy.job_spec)
names every field.
"""

from __future__ import annotations

import dataclasses
import functools

from lmstudy.measure.model import ModelConfig
from lmstudy.model_choice import ModelChoice


def model_dims(spec) -> dict[str, int]:
    """The dimensions that set the model's parameters and FLOPs, of any spec that has them."""
    return {
        "vocab_size": spec.vocab_size,
        "d_model": spec.d_model,
        "d_ff": spec.d_ff,
        "num_layers": spec.num_layers,
        "num_heads": spec.num_heads,
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec:
    size: str
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    context_length: int
    batch_size: int
    vocab_size: int
    precision: str
    device: str
    tf32: bool
    memory_cap_gb: float | None
    # The model's factory and label (config model:).
    model: ModelChoice

    @property
    def model_attention(self) -> str:
        """The attention the model is built with; subclasses choose it their own way."""
        return "naive"

    @property
    def model_config(self) -> ModelConfig:
        return ModelConfig(
            vocab_size=self.vocab_size,
            context_length=self.context_length,
            d_model=self.d_model,
            d_ff=self.d_ff,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            attention=self.model_attention,
        )

    @property
    def dims(self) -> dict[str, int]:
        return model_dims(self)

    def parameter_count(self) -> int:
        """The model's parameter count: the built-in model's by formula (tested against the model),
        another's counted from its parameters, built on the meta device."""
        from lmstudy.flops import parameter_count

        if self.model.builtin:
            return parameter_count(**self.dims)
        return _parameters(self.model, tuple(self.dims.items()), self.context_length)

    def matmul_parameter_count(self) -> int | None:
        """The parameters that take part in a matrix product (the N of 6N): the built-in model's by
        formula, another's as its forward uses them (lmstudy.measure.factory.ParametersInMatmuls)."""
        from lmstudy.flops import parameter_count

        if self.model.builtin:
            return parameter_count(**self.dims, in_matmuls=True)
        return self.counted().get("matmul_parameters")

    def flops_per_step(self, pass_name: str) -> float:
        """The FLOPs of one step: the built-in model's by formula, which PyTorch's FlopCounterMode
        matches exactly (tests/test_model_factory.py); another's counted by FlopCounterMode, on the meta
        device, or where its forward cannot run there, on the device (count_on_device): until then,
        lmstudy.measure.factory.CountOnDevice."""
        from lmstudy.flops import flops_per_step

        if self.model.builtin:
            return flops_per_step(pass_name, self.batch_size, self.context_length, **self.dims)
        counted = self.counted()[pass_name]
        # None: a model without a backward, whose backward passes stop when measured.
        return float(counted) if counted is not None else float("nan")

    def counted(self) -> dict:
        """FLOPs per pass of the model: counted on the device by this process (count_on_device), else
        on the meta device (lmstudy.measure.factory.count_on_meta), which may raise CountOnDevice."""
        key = self._count_key
        if key in _ON_DEVICE:
            return _ON_DEVICE[key]
        counted = _counted(*key)
        if "on_device" in counted:
            from lmstudy.measure.factory import CountOnDevice

            raise CountOnDevice(counted["on_device"])
        return counted

    def count_on_device(self, model) -> dict | None:
        """Count the FLOPs of `model` (this spec's model, built on the measuring device and measured
        already) where the meta device cannot: the counts that flops_per_step gives from now on in
        this process, returned; None where the count does not fit the device, or needs no device."""
        from lmstudy.measure.factory import CountOnDevice, count_on_device

        if self.model.builtin:
            return None
        try:
            return self.counted()
        except CountOnDevice:
            pass
        counted = count_on_device(model, self.batch_size, self.context_length, self.vocab_size,
                                  self.model.factory)
        if counted is not None:
            _ON_DEVICE[self._count_key] = counted
        return counted

    @property
    def _count_key(self) -> tuple:
        return self.model, tuple(self.dims.items()), self.context_length, self.batch_size

    @property
    def flops_counted_by(self) -> str:
        return "formula (equal to FlopCounterMode)" if self.model.builtin else "FlopCounterMode"

    def not_applicable(self) -> str | None:
        """Why this spec cannot be measured on its model (its attention cannot be switched): the
        reason its rows give with status "not applicable", as the ladder's rungs do; None where it can."""
        if self.model.builtin:
            return None
        from lmstudy.measure.factory import attention_not_applicable

        why = attention_not_applicable(self.model, self.model_attention)
        return f"{self.model.label}: {why}" if why else None

    def build_workload(self, device, with_optimizer: bool = True):
        """The model on `device` with its batch (and optimizer), as the spec says."""
        from lmstudy.errors import UserError
        from lmstudy.measure.factory import NotApplicable
        from lmstudy.measure.steps import build_workload

        try:
            return build_workload(
                self.model_config, self.batch_size, self.precision, device, with_optimizer=with_optimizer,
                choice=self.model,
            )
        except NotApplicable as why:
            raise UserError(f"{self.model.label}: {why} Measure it with attention naive only.") from None


def init_fields(spec) -> dict:
    """The fields a spec is made of (not those it derives, as a ladder rung's precision): what
    rebuilds it, as cls(**init_fields(spec)); plain data, as dataclasses.asdict gives it."""
    return {key: value for key, value in dataclasses.asdict(spec).items() if key in
            {f.name for f in dataclasses.fields(spec) if f.init}}


# FLOPs counted on the device by this process (ModelSpec.count_on_device), by ModelSpec._count_key.
_ON_DEVICE: dict[tuple, dict] = {}


@functools.cache
def _counted(choice: ModelChoice, dims: tuple, context_length: int, batch_size: int) -> dict:
    from lmstudy.measure.factory import CountOnDevice, count_on_meta

    try:
        return count_on_meta(choice, dict(dims), context_length, batch_size)
    except CountOnDevice as why:  # remembered: the meta device is tried once a process
        return {"on_device": str(why)}


@functools.cache
def _parameters(choice: ModelChoice, dims: tuple, context_length: int) -> int:
    from lmstudy.measure.factory import parameters_on_meta

    return parameters_on_meta(choice, dict(dims), context_length)


def from_fields(cls, fields: dict):
    """A `cls` (a spec dataclass) of a job spec's fields (lmstudy.job_spec): its lists as tuples,
    its noise as a NoisePolicy; a UserError names a key `cls` has no field for."""
    from lmstudy.errors import IncompleteSpec, UserError
    from lmstudy.measure.repeat import NoisePolicy

    unknown = set(fields) - {f.name for f in dataclasses.fields(cls) if f.init}
    if unknown:
        raise UserError(f"the spec's {', '.join(sorted(unknown))}: not a setting of this job; remove it.")
    missing = sorted(f.name for f in dataclasses.fields(cls) if f.name not in fields and f.init
                     and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    if missing:
        raise IncompleteSpec(missing)
    values = {key: tuple(v) if isinstance(v, list) else v for key, v in fields.items()}
    if isinstance(values.get("noise"), dict):
        values["noise"] = NoisePolicy(**values["noise"])
    if "model" in values:
        values["model"] = ModelChoice.coerce(values["model"])
    return cls(**values)

