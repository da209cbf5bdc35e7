# One command to install and run the study, one to run the tests.
#   make study                       the full study on this machine's GPU
#   make study PRESET=quick          every section in a few minutes
#   make test                        unit tests + the smoke workflow (CPU only), its report
#                                    in headless Chromium (installed from apt as root)
#   make test-slurm                  the smoke workflow on a private SLURM cluster it
#                                    installs, starts, then stops and removes (root)
VENV ?= .venv
PY := $(VENV)/bin/python
PRESET ?= full
# On a GPU machine the default PyPI torch (a CUDA build) is right; the tests
# pin the CPU build so that CI does not download several GB.
TORCH ?= torch
TEST_TORCH ?= torch==2.13.0

.PHONY: study test test-slurm install install-test lint

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(VENV)/bin/python
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[slurm]"

study: install
	$(VENV)/bin/snakemake --cores 1 --resources gpu=1 --config preset=$(PRESET)

install-test: $(VENV)/bin/python
	$(PY) -m pip install -q "$(TEST_TORCH)"
	$(PY) -m pip install -q -e ".[test,slurm]"
	@# The browser test (tests/test_report_browser.py) opens the report in Debian's Chromium.
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: no chromium; the browser test is skipped (apt-get install chromium)"; fi; }

test: install-test
	$(PY) -m pytest -q tests

# Outside CI (CI set), `make test` skips the real-SLURM test; this runs it.
test-slurm: install-test
	LMSTUDY_TEST_SLURM=1 $(PY) -m pytest -q tests/test_slurm.py

lint: install-test
	$(VENV)/bin/snakemake --lint --cores 1
	$(VENV)/bin/snakefmt --check .
	$(VENV)/bin/ruff check .
