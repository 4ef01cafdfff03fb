# DART reproducibility suite. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
PROFILE ?= smoke
FMNIST_DIR := /usr/share/datasets/fashion-mnist
NBVAL_FLAGS := --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: help setup os-packages reproduce test test-kernels lab clean-runs

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=$(PROFILE) (make reproduce PROFILE=cpu)"

setup: $(STAMP) ## create .venv/ with the suite installed, plus the OS-level data packages
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e . 2>&1 | grep -v "is ignored" || true
	@$(PY) -c "import dartlib, torch, papermill, nbval" || { echo "setup: installing the suite failed" >&2; exit 1; }
	@$(MAKE) --no-print-directory os-packages
	@touch $@

os-packages: ## install Debian's Fashion-MNIST (dataset-fashion-mnist) where this machine allows it
	@if [ -d $(FMNIST_DIR) ]; then \
	  echo "Fashion-MNIST present in $(FMNIST_DIR)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null) \
	    || echo "warning: apt-get could not install dataset-fashion-mnist; torchvision will download Fashion-MNIST instead"; \
	else \
	  echo "note: run 'sudo apt-get install dataset-fashion-mnist' (Debian/Ubuntu) or let torchvision download Fashion-MNIST"; \
	fi

reproduce: setup ## run the whole notebook sequence with papermill (PROFILE=smoke by default)
	$(PY) -m dartlib run --profile $(PROFILE)

test: setup ## unit tests plus nbval over the committed notebooks
	TQDM_DISABLE=1 $(PY) -m pytest tests notebooks $(NBVAL_FLAGS)

# Another CPU type rounds differently; changing the math libraries' kernels on this machine does the
# same. The smoke results are recomputed from scratch under them (results/smoke/ and figures/smoke/
# are regenerated outputs) and every notebook is checked again, notebook 99 comparing the numbers
# with the stored values within tolerance (dartlib.reporting.reference).
OTHER_KERNELS := ONEDNN_MAX_CPU_ISA=SSE41 MKL_CBWR=COMPATIBLE
test-kernels: setup ## every notebook again, recomputed under other math kernels (another CPU type's rounding)
	rm -rf results/smoke figures/smoke
	$(OTHER_KERNELS) TQDM_DISABLE=1 $(PY) -m pytest notebooks $(NBVAL_FLAGS)

lab: setup ## JupyterLab on the suite
	$(VENV)/bin/jupyter lab --notebook-dir=.

clean-runs: ## remove executed notebook copies (runs/)
	rm -rf runs
