# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
# Targets' test commands (python -m pytest) must find the venv's Python first.
export PATH := $(BIN):$(PATH)

.PHONY: demo test test-slurm lint bench clean-demo

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/snakemake --cores 1 sessions/demo/done
	$(BIN)/autoresearch status demo

# pytest exits 5 when it collects no test; that is not a failure of the suite.
test: $(VENV)/.installed
	$(BIN)/python -m pytest; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]

# Sessions through profiles/slurm on a real Slurm: yours if AUTORESEARCH_SLURM_PARTITION
# (and AUTORESEARCH_SLURM_ACCOUNT) are set, else a one-node cluster that
# tests/cluster/local-slurm.sh installs and starts here (root, Debian) and stops again.
test-slurm: $(VENV)/.installed
	$(BIN)/python -m pytest -m slurm -rs tests/cluster

lint: $(VENV)/.installed
	$(BIN)/ruff check autoresearch tests bench
	$(BIN)/ruff format --check autoresearch tests bench
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --cores 1 sessions/demo/done

bench: $(VENV)/.installed
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean-demo:
	rm -rf sessions/demo sessions/_examples
