# DART reproducibility suite. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
PROFILE ?= smoke
FMNIST_DIR := /usr/share/datasets/fashion-mnist
NBVAL_FLAGS := --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: help setup os-packages reproduce test test-kernels lab book clean-runs signal-check

# Recipes that run python end in `exec`: python is then make's own child, which make's SIGTERM
# reaches (make passes on SIGTERM to its children, not to a grandchild behind a shell). python -m
# dartlib stops on SIGTERM as on Ctrl-C (kernels and workers shut down, partial files removed, the
# resume hint) and, under make, also ends when make itself is killed (SIGKILL).

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=$(PROFILE) (make reproduce PROFILE=cpu)"

setup: $(STAMP) ## create .venv/ with the suite and all its extras installed, plus the OS-level data packages
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# torch's CUDA build alone is several GiB: say so up front rather than fail mid-install
	@if ! $(PY) -c "import torch" 2>/dev/null; then \
	  avail=$$(df -Pk . | awk 'NR==2 {print $$4}'); \
	  if [ "$$avail" -lt 8388608 ]; then \
	    echo "setup: $$((avail / 1048576)) GiB free in $$(pwd); installing torch into $(VENV)/ needs about 8 GiB: free some space (df -h .), then rerun 'make setup'" >&2; \
	    exit 1; \
	  fi; \
	fi
	@# the core and every extra (notebooks, book, ray, dev); the core alone is `pip install .`
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[all]" 2>&1 | grep -v "is ignored" || true
	@$(PY) -c "import dartlib, torch, papermill, nbval" || { echo "setup: installing the suite failed" >&2; exit 1; }
	@$(MAKE) --no-print-directory os-packages
	@touch $@

os-packages: ## install Debian's Fashion-MNIST (dataset-fashion-mnist) and chromium (browser tests) where this machine allows it; else download Fashion-MNIST
	@missing=""; \
	[ -d $(FMNIST_DIR) ] || missing="$$missing dataset-fashion-mnist"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -z "$$missing" ]; then \
	  echo "Fashion-MNIST present in $(FMNIST_DIR); chromium present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	    || echo "warning: apt-get could not install$$missing (without chromium the browser tests skip)"; \
	else \
	  echo "note: run 'sudo apt-get install$$missing' (Debian/Ubuntu); without chromium the browser tests skip"; \
	fi
	@$(PY) -c "from dartlib.data.sources import load_fmnist; load_fmnist(split='test')" 2>/dev/null \
	  || { echo "Fashion-MNIST not found: downloading it with torchvision into data/FashionMNIST/"; \
	       $(PY) -m dartlib data download fmnist; } \
	  || echo "warning: Fashion-MNIST is missing and could not be downloaded; the smoke notebooks need it: run 'sudo apt-get install dataset-fashion-mnist', or '$(PY) -m dartlib data download fmnist' with internet access"

# RUN_FLAGS: more options of `python -m dartlib run` (e.g. "--budget 540": a time guard); NO_SETUP=1 PY=python3: a
# machine without the suite's virtual environment and without internet (a GPU slot, docs/gpu.md)
RUN_FLAGS ?=
reproduce: $(if $(filter 1,$(NO_SETUP)),,setup) ## run the notebook sequence with papermill (PROFILE=smoke by default; RUN_FLAGS="--budget 540")
	exec $(PY) -m dartlib run --profile $(PROFILE) $(RUN_FLAGS)

test: setup ## unit tests plus nbval over the committed notebooks
	exec env TQDM_DISABLE=1 $(PY) -m pytest tests notebooks $(NBVAL_FLAGS)

# Another CPU type rounds differently; changing the math libraries' kernels on this machine does the
# same. The smoke results are recomputed from scratch under them (results/smoke/ and figures/smoke/
# are regenerated outputs) and every notebook is checked again, notebook 99 comparing the numbers
# with the stored values within tolerance (dartlib.reporting.reference).
OTHER_KERNELS := ONEDNN_MAX_CPU_ISA=SSE41 MKL_CBWR=COMPATIBLE
test-kernels: setup ## every notebook again, recomputed under other math kernels (another CPU type's rounding)
	rm -rf results/smoke figures/smoke
	exec env $(OTHER_KERNELS) TQDM_DISABLE=1 $(PY) -m pytest notebooks $(NBVAL_FLAGS)

lab: setup ## JupyterLab on the suite (python -m dartlib lab --help: port, token, no browser)
	exec $(PY) -m dartlib lab

book: setup ## the results book of PROFILE (static HTML in build/book/<profile>/html/) from its executed notebooks
	exec $(PY) -m dartlib book --profile $(PROFILE)

clean-runs: ## remove executed notebook copies (runs/)
	rm -rf runs

# tests/test_faults_io.py: a python that waits as a long target does, set up as python -m dartlib
# sets itself up; killing make (SIGTERM, SIGKILL) must end it
signal-check:
	@exec $(PY) -c "from dartlib.cli import signals_stop_the_command as s; s(); import time; print('ready', flush=True); time.sleep(120)"
