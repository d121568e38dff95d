# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
# Targets' test commands (python -m pytest) must find the venv's Python first.
export PATH := $(BIN):$(PATH)

.PHONY: demo test test-slurm test-claude-code lint bench clean-demo sandbox

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

# The target's commands run in a bubblewrap jail, and setup traces what a measurement runs
# with strace; the harness's own git runs in gitbox, a Landlock launcher built here from C
# (autoresearch/safety/gitbox.c; docs/safety.md). Installed here when missing and we can (root, apt); elsewhere
# sessions say that they run without them, and the tests that need them skip, saying why.
sandbox:
	@{ command -v bwrap && command -v strace; } >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq bubblewrap strace >/dev/null 2>&1 || \
	    { apt-get update -qq && apt-get install -y -qq bubblewrap strace >/dev/null; }; }; } || \
	  echo "note: bubblewrap (bwrap) or strace is not installed: commands run without a jail, or measurements are not traced (docs/safety.md)"
	@$(PYTHON) -c 'import sys; sys.path.insert(0, "autoresearch/safety"); import gitbox; sys.exit(0 if gitbox.build() else 1)' || \
	  echo "note: no C compiler: the harness's git is confined by bwrap, not by Landlock (docs/safety.md)"

demo: sandbox $(VENV)/.installed
	$(BIN)/snakemake --cores 1 sessions/demo/done sessions/demo-experiment/done
	$(BIN)/autoresearch status demo

# pytest exits 5 when it collects no test; that is not a failure of the suite. Three
# workers on two cores, each taking whole test files (a file's session fixture is built
# once): the e2e tests wait on the target's test runs, git and sleeping agents as much as
# they compute. Files go out in the order tests/conftest.py gives them (long session files
# first, quick unit files last to fill in); xdist's own order (most tests first) sent the
# long e2e files with few tests last, and the suite's last minutes ran on one worker.
test: sandbox $(VENV)/.installed
	$(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]

# Sessions through profiles/slurm on a real Slurm: yours if AUTORESEARCH_SLURM_PARTITION
# (and AUTORESEARCH_SLURM_ACCOUNT) are set, else a one-node cluster that
# tests/cluster/local-slurm.sh installs and starts here (root, Debian) and stops again.
# The Slurm plugin is installed for these tests only: at import it loads pandas, and every
# Snakemake start imports every installed executor plugin (0.6-0.8 s of CPU a start, which
# the main suite pays a few hundred times).
test-slurm: sandbox $(VENV)/.installed $(VENV)/.slurm-installed
	$(BIN)/python -m pytest -m slurm -rs tests/cluster

$(VENV)/.slurm-installed: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[slurm]"
	touch $@

# The Claude Code plugin (claude-plugin/) through the real Claude Code CLI, against the fake
# Messages API on 127.0.0.1 with a dummy key and a fresh HOME (docs/claude-code.md). Uses
# CLAUDE=/path/to/claude when given, else installs @anthropic-ai/claude-code from npm into
# .claude-code/ (npm's cache too: nothing is left outside the checkout). Not part of
# `make test`: it needs npm (and the registry) once.
CLAUDE ?= $(CURDIR)/.claude-code/node_modules/.bin/claude
test-claude-code: $(VENV)/.installed $(CLAUDE)
	CLAUDE=$(CLAUDE) $(BIN)/python -m pytest -m claude_code -rs tests/claude_code

$(CURDIR)/.claude-code/node_modules/.bin/claude:
	npm install --prefix $(CURDIR)/.claude-code --cache $(CURDIR)/.claude-code/npm-cache \
	  --no-save --no-audit --no-fund --no-update-notifier @anthropic-ai/claude-code

# Jest for the canary tests of Jest's runs (tests/unit/test_runner_canary.py), from npm into
# .jest/ (npm's cache too); those tests skip without it, and .ci/run requires them.
$(CURDIR)/.jest/node_modules/.bin/jest:
	npm install --prefix $(CURDIR)/.jest --cache $(CURDIR)/.jest/npm-cache \
	  --no-save --no-audit --no-fund --no-update-notifier jest

lint: $(VENV)/.installed
	$(BIN)/ruff check autoresearch scripts tests bench
	$(BIN)/ruff format --check autoresearch scripts tests bench
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --cores 1 sessions/demo/done

bench: $(VENV)/.installed
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean-demo:
	rm -rf sessions/demo sessions/_examples
