"""The mixed-precision section's jobs (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.job_spec import dtype_size, model_fields
from lmstudy.model_choice import STANDARD_KEYS
from lmstudy.registry import Job


def _precision(config: dict, w: dict) -> dict:
    """The toy model's and the study model's dtypes under autocast: the study model (config model:)
    at its smallest size and shortest context (lmstudy.job_spec.dtype_size)."""
    model = model_fields(config, dtype_size(config), min(config["timing"]["context_lengths"]), "fp32")
    del model["precision"], model["memory_cap_gb"]  # autocast's dtypes, each in turn; the whole device
    return model


def _norms(config: dict, w: dict) -> dict:
    """The study model of one size at the timing section's shortest context (the norms' errors)."""
    model = model_fields(config, w["size"], min(config["timing"]["context_lengths"]), "fp32")
    del model["precision"], model["tf32"], model["memory_cap_gb"]  # fp32 and the whole device, always
    del model["model"]  # the norms' experiment builds the built-in model: it studies its RMSNorm
    return model


# The built-in model's dimensions in a spec (lmstudy.measure.model.ModelConfig's required fields).
MODEL_CONFIG_KEYS = ("vocab_size", "context_length", *STANDARD_KEYS)


def dtypes(fields: dict, paths: dict):
    """Accumulation in fp32, fp16 and bf16, and the dtypes under autocast of a toy model and of the
    study model (lmstudy.measure.precision): a CSV to each of paths accumulation, dtypes, model_dtypes."""
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure import precision
    from lmstudy.measure.devices import open_device
    from lmstudy.measure.model import ModelConfig
    from lmstudy.model_choice import ModelChoice
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    with clock.timing("start"):
        device, env = open_device(fields["device"], fields["tf32"])
    with clock.timing("measure"):
        accumulation, toy_dtypes = precision.run_all(device)
        if paths["model_dtypes"]:
            choice = ModelChoice.coerce(fields["model"])
            config = ModelConfig(**{key: fields[key] for key in MODEL_CONFIG_KEYS})
            model_rows = precision.run_model(choice, config, device, fields["batch_size"])
    write_csv(
        paths["accumulation"], pd.DataFrame([{**row, "device": device.type, **env} for row in accumulation])
    )
    write_csv(paths["dtypes"], pd.DataFrame([{**row, "device": device.type, **env} for row in toy_dtypes]))
    if paths["model_dtypes"]:
        where = {"model": choice.label, "size": fields["size"], "context_length": fields["context_length"],
                 "depth": precision.dtype_depth(choice.range_depth), "device": device.type}
        write_csv(paths["model_dtypes"], pd.DataFrame([{**where, **row, **env} for row in model_rows]))
    for row in accumulation:
        print(f"{row['method']}: {row['result']:.6f} (error {row['abs_error']:.2e})")
    return clock


# Multiples of the activations the norms' errors are measured at (large values overflow fp16).
NORM_SCALES = (1.0, 100.0)


def norm_errors(fields: dict, paths: dict):
    """The error of RMSNorm and LayerNorm in fp16 and bf16, operation by operation, on the built-in
    model's activations (lmstudy.measure.norm_precision): a CSV to paths["out"]."""
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure import norm_precision
    from lmstudy.measure.devices import open_device
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    with clock.timing("start"):
        device, env = open_device(fields["device"])
    with clock.timing("measure"):
        dims = {key: fields[key] for key in MODEL_CONFIG_KEYS}
        rows = norm_precision.built_in_model_errors(dims, fields["batch_size"], device, NORM_SCALES)
    where = {
        "size": fields["size"],
        "d_model": fields["d_model"],
        "context_length": fields["context_length"],
        "batch_size": fields["batch_size"],
        "device": device.type,
    }
    write_csv(paths["out"], pd.DataFrame([{**where, **row, **env} for row in rows]))
    for row in rows:
        if row["low_precision_op"] == norm_precision.ALL and row["scale"] == 1.0:
            print(f"{row['norm']} {row['precision']}: mean error {row['error_mean']:.2e}")
    return clock


JOBS = {
    "precision": Job(
        wildcards=(),
        spec=_precision,
        runner="lmstudy.sections.precision.jobs:dtypes",
        paths=(
            ("accumulation", "CSV of the accumulation rows"),
            ("dtypes", "CSV of the toy model's dtypes"),
            ("model_dtypes?", "CSV of the study model's dtypes"),
        ),
        forks=False,
    ),
    "norms": Job(
        wildcards=("size",),
        spec=_norms,
        runner="lmstudy.sections.precision.jobs:norm_errors",
        paths=(("out", "CSV of the errors"),),
        forks=False,
    ),
}
