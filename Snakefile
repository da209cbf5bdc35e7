# Benchmarking and profiling study of a Transformer language model.
#   snakemake --cores 1 --resources gpu=1                      (the full study)
#   snakemake --cores 1 --resources gpu=1 --config preset=quick
#   snakemake --cores 1 --config preset=smoke                  (CPU only)
#   snakemake --cores 1 report/compare/<A>_vs_<B>/index.html   (two runs compared)

from snakemake.utils import min_version

# The version pyproject.toml asks for: older ones lack what the rules use.
min_version("9.27")


# Snakemake's own message for a broken config.yaml names no line: said with its line first.
from lmstudy import config as study_config

try:
    study_config.check_yaml_file("config.yaml")
except study_config.ConfigError as error:
    raise WorkflowError(str(error)) from None


configfile: "config.yaml"


include: "workflow/rules/common.smk"


# One rule file per report section, in the registry's order (lmstudy.registry.NAMES):
# a section reads the tables of those before it, and cost, the last, counts every job.
for section_name in SECTION_NAMES:

    include: f"workflow/rules/{section_name}.smk"


include: "workflow/rules/report.smk"
include: "workflow/rules/compare.smk"


localrules:
    all,


rule all:
    default_target: True
    input:
        REPORT_FILES,
