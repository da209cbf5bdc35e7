# One command to install and run the study, one to run the tests.
#   make study                       the full study on this machine's CUDA GPU
#   make study PRESET=quick          every section in a few minutes
#   make study PRESET=smoke          the whole workflow on the CPU with tiny models; its report in
#                                    report/default/index.html
#   make test                        unit tests + the smoke workflow (CPU only), its report;
#                                    installs nothing outside .venv
#   make unit                        the unit tests only: the loop while editing (minutes, not
#                                    the quarter hour of the tests that run the workflow's jobs)
#   make browser                     (root) Debian's Chromium, without recommends, for the
#                                    browser test that `make test` otherwise skips
#   make test-slurm                  the smoke workflow on a private SLURM cluster it
#                                    installs, starts, then stops and removes (root)
#   make lint                        snakemake --lint, snakefmt and ruff
#   make help (or make)              this list
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check
PRESET ?= full
# On a CUDA machine PyPI's torch (the CUDA build) is right.
TORCH ?= torch
# The tests need the CPU build only. On PyPI, Linux x86-64's torch is the CUDA
# build (2.5 GB with its CUDA packages); PyTorch's own CPU index serves the
# same version without them (about 200 MB). Where that index cannot be
# reached, the default index's torch is installed instead.
TEST_TORCH ?= torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# Installed only by `make browser` (CI runs it): the tests never install a system package.
BROWSER_PACKAGES ?= chromium
SMOKE := $(VENV)/bin/snakemake --cores 2 --config preset=smoke

.PHONY: help study test unit test-slurm install install-test lint browser check-cuda

# Bare `make` says what it can do (the comment above), and installs nothing.
.DEFAULT_GOAL := help
help:
	@sed -n '2,/^[^#]/s/^#   //p' $(firstword $(MAKEFILE_LIST))

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip

# Before anything heavy is installed: a GPU preset needs a CUDA GPU, and
# without one PyTorch's CUDA build (about 3 GB) would be downloaded for
# nothing. nvidia-smi or the driver's /proc entry is the cheapest sign of one.
check-cuda:
	@nvidia-smi -L >/dev/null 2>&1 || [ -e /proc/driver/nvidia/version ] || { \
	  echo "error: this machine has no CUDA GPU (no nvidia-smi, no NVIDIA driver), so preset $(PRESET) cannot run here: run the CPU smoke study instead with \`make study PRESET=smoke\`." >&2; \
	  exit 2; }

install: $(VENV)/bin/python
	$(PIP) "$(TORCH)"
	$(PIP) -e ".[slurm]"

ifeq ($(PRESET),smoke)
study: install-test
	$(SMOKE)
else
study: check-cuda
	$(MAKE) install VENV=$(VENV)
	$(VENV)/bin/snakemake --cores 1 --resources gpu=1 --config preset=$(PRESET)
endif

# Whether the CPU index answers is asked once, in 10 s, before pip (which would
# retry every package five times against an index it cannot reach).
install-test: $(VENV)/bin/python
	@if $(PY) -c "import urllib.request; urllib.request.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=10)" 2>/dev/null; then \
	  echo "$(PIP) --index-url $(TORCH_CPU_INDEX) \"$(TEST_TORCH)\""; \
	  $(PIP) --index-url $(TORCH_CPU_INDEX) "$(TEST_TORCH)"; \
	else \
	  echo "note: $(TORCH_CPU_INDEX) cannot be reached; installing $(TEST_TORCH) from the default index"; \
	  $(PIP) "$(TEST_TORCH)"; \
	fi
	$(PIP) -e ".[test,slurm,hf]"

# The browser test (tests/test_report_browser.py) opens the report in Debian's
# Chromium. Recommends are left out: the browser needs none of them.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES) >/dev/null; }

test: install-test
	$(PY) -m pytest -q -rs --durations=20 tests

# Every test but those marked `workflow` (pyproject.toml): the ones that run jobs of the workflow
# (the smoke run and the like). Installs as `make test` does on the first call only, so the loop
# stays quick; `make test` and CI run everything.
unit: $(VENV)/bin/pytest
	$(PY) -m pytest -q -rs -m "not workflow" tests

$(VENV)/bin/pytest:
	$(MAKE) install-test VENV=$(VENV)

# Outside CI (CI set), `make test` skips the real-SLURM test; this runs it.
test-slurm: install-test
	LMSTUDY_TEST_SLURM=1 $(PY) -m pytest -q tests/test_slurm.py

lint: install-test
	$(VENV)/bin/snakemake --lint --cores 1
	$(VENV)/bin/snakefmt --check .
	$(VENV)/bin/ruff check .
