# Config helpers and target lists. Parse time imports no torch and touches
# no GPU: on a cluster the DAG is built on a submit host without one.
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)

from lmstudy import config as study_config  # noqa: E402


try:
    config = study_config.load(
        config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"
    )
except study_config.ConfigError as error:
    raise WorkflowError(str(error)) from None

PYTHON = sys.executable
# Absolute, so the workflow also runs with --directory elsewhere (the tests do).
BASE = Path(workflow.basedir)
SCRIPTS = BASE / "scripts"
RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"logs/{RUN}"
# section name -> its aggregated tables; filled by each section's rule file,
# read by report.smk.
SECTION_TABLES = {}


def enabled(section):
    return config.get(section, {}).get("enabled", False)


def size_dims(size):
    return config["sizes"][size]


def alternatives(values):
    """A wildcard constraint that accepts exactly these values."""
    import re

    return "|".join(re.escape(str(v)) for v in values)


def optional_flag(flag, value):
    return "" if value is None else f"{flag} {value}"


wildcard_constraints:
    size=alternatives(config["sizes"]),
    ctx=r"\d+",
    precision="fp32|bf16",
    variant="naive|sdpa|naive-compile|sdpa-compile",
