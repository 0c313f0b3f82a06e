# ShopOps Lab: `make setup`, `make lab`, `make test`, `make test-fast`, `make doctor`, `make clean`.
# Plain POSIX sh and GNU make 3.81 features only, so it runs on stock macOS as well as Linux.

SHELL := /bin/sh
VENV := .venv
PY := $(VENV)/bin/python
# Setup reruns only when one of these changes (mtime), or when .venv is deleted.
STAMP := $(VENV)/.shopops-setup-stamp
NOTEBOOK_DIRS := solutions notebooks
START_NOTEBOOK := notebooks/00_start_here.ipynb
# Extra flags, e.g. make test PYTEST_ARGS="-x -k lease"; make lab LAB_ARGS="--no-browser"
PYTEST_ARGS ?=
# Test files run in parallel; each file (each notebook) runs whole in one worker, and files that
# share a built site are kept together (tests/conftest.py). One worker more than the cores: a
# worker waiting on a kernel, a browser or a disk flush leaves its core to another (a 2-core CI
# run kept its cores 70% busy with one worker per core). XDIST= runs serially.
WORKERS ?= $(shell python3 -c 'import os; print((os.cpu_count() or 1) + 1)' 2>/dev/null || echo 2)
XDIST ?= -n $(WORKERS) --dist loadfile
# make test-fast: everything but the suites marked slow (tests/conftest.py), Hypothesis on its quick profile
FAST_ARGS ?= -m 'not slow'
# CI sets this: pytest's exit 5 (it collected no test) is reported, not a failure of the run
ALLOW_NO_TESTS ?=
NBVAL_ARGS ?= --nbval-cell-timeout=300 --nbval-sanitize-with tests/nbval_sanitize.cfg
LAB_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help setup lab test test-fast doctor clean

help:
	@echo "make setup   create .venv (Python 3.11+), install requirements.txt and Graphviz dot"
	@echo "make lab     open the course in JupyterLab"
	@echo "make test    run tests/ and every notebook in $(NOTEBOOK_DIRS) (nbval), in parallel"
	@echo "make test-fast  the quick answer: tests/ without the slow suites (browser, nbgrader, PostgreSQL, notebooks)"
	@echo "make doctor  check this machine and print fixes"
	@echo "make clean   delete .venv and caches"

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml scripts/setup.sh
	@VENV=$(VENV) sh scripts/setup.sh
	@touch $@

lab: setup
	@flag=""; if [ "`id -u`" = 0 ]; then flag="--allow-root"; fi; \
	target=$(START_NOTEBOOK); if [ ! -f "$$target" ]; then target=notebooks; fi; \
	exec $(VENV)/bin/jupyter lab $$flag $(LAB_ARGS) "$$target"

# One pytest run, so there is one summary line. Notebooks join it only if there are any:
# a folder with none is "nothing to check"; notebooks that collect nothing are a failure.
test: setup
	@dirs=""; for d in $(NOTEBOOK_DIRS); do \
	  if [ -n "`find $$d -name '*.ipynb' ! -path '*/.ipynb_checkpoints/*' 2>/dev/null | head -n 1`" ]; then \
	    dirs="$$dirs $$d"; fi; \
	done; \
	if [ -n "$$dirs" ]; then \
	  set -- tests --nbval $(NBVAL_ARGS) $$dirs; \
	else \
	  echo "(no notebooks in $(NOTEBOOK_DIRS) yet: running tests/ only)"; \
	  set -- tests; \
	fi; \
	echo "PYTHONHASHSEED=0 $(PY) -m pytest $(XDIST) $$* $(PYTEST_ARGS)"; \
	status=0; PYTHONHASHSEED=0 $(PY) -m pytest $(XDIST) "$$@" $(PYTEST_ARGS) || status=$$?; \
	if [ $$status = 5 ] && [ -n "$(ALLOW_NO_TESTS)" ]; then echo "pytest collected no test (exit 5)"; status=0; fi; \
	exit $$status

test-fast: setup
	@echo "HYPOTHESIS_PROFILE=dev PYTHONHASHSEED=0 $(PY) -m pytest $(XDIST) $(FAST_ARGS) tests $(PYTEST_ARGS)"; \
	HYPOTHESIS_PROFILE=dev PYTHONHASHSEED=0 $(PY) -m pytest $(XDIST) $(FAST_ARGS) tests $(PYTEST_ARGS)

doctor:
	@if [ ! -x $(VENV)/bin/shopops-lab ]; then echo "No $(VENV) yet: run make setup first."; exit 1; fi
	@$(VENV)/bin/shopops-lab doctor

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache build dist _output *.egg-info
	find . -path ./.git -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -prune -exec rm -rf {} +
