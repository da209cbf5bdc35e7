"""The model configuration every measuring job shares: sizes, precision, device.

Each section's spec (TimingSpec, ProfileSpec, SnapshotSpec, CompileSpec)
extends ModelSpec with its own fields. The fields are keyword-only, so a
subclass may add fields with or without defaults in any order.
"""

from __future__ import annotations

import dataclasses

from lmstudy.measure.model import ModelConfig


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
    device: str = "cuda"
    tf32: bool = False
    memory_cap_gb: float | None = None

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
        """The model's parameter count, by formula (tested against the model): no torch needed."""
        from lmstudy.flops import parameter_count

        return parameter_count(**self.dims)

    def build_workload(self, device, with_optimizer: bool = True):
        """The model on `device` with its batch (and optimizer), as the spec says."""
        from lmstudy.measure.steps import build_workload

        return build_workload(
            self.model_config, self.batch_size, self.precision, device, with_optimizer=with_optimizer
        )


def from_fields(cls, fields: dict):
    """A `cls` (a spec dataclass) of a job spec's fields (lmstudy.job_spec): its lists as tuples,
    its noise as a NoisePolicy; a UserError names a key `cls` has no field for."""
    from lmstudy.errors import UserError
    from lmstudy.measure.repeat import NoisePolicy

    unknown = set(fields) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise UserError(f"the spec's {', '.join(sorted(unknown))}: not a setting of this job; remove it.")
    values = {key: tuple(v) if isinstance(v, list) else v for key, v in fields.items()}
    if isinstance(values.get("noise"), dict):
        values["noise"] = NoisePolicy(**values["noise"])
    return cls(**values)
