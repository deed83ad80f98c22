# btb-gym: every command sets up the virtual environment first if needed.
#   make run    set up, then run the main job on the built-in workload
#   make test   set up, then run the test suite
#   make bench  set up, then run the throughput benchmark
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install run test bench lint

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) -m experiments.compare

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) -m experiments.bench

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy envs baselines experiments
