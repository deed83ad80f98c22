# btb-gym: every command sets up the virtual environment first if needed.
#   make run    set up, then run the main job on the built-in workload
#   make test   set up, then lint (ruff, mypy) and run the test suite
#   make bench  set up, then run the throughput benchmark
#   make zoo-check [ZOO=a,b]  set up, then train zoo agents again by their READMEs'
#               commands and compare the weights (one to two hours for the whole zoo)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Installed before the project so pip never resolves torch on its own (which can
# pull a multi-GB CUDA build). Override for your platform, e.g.
#   make TORCH="torch --index-url https://download.pytorch.org/whl/cpu" test
TORCH ?= torch==2.13.0
# Processes the test suite runs on (pytest-xdist; an idle one takes tests from a
# busy one); 0 runs it in this process.
TEST_WORKERS ?= 2
# The zoo agents zoo-check trains again (comma-separated; empty: every one).
ZOO ?=

.PHONY: install run test bench lint zoo-check

# setup.py and the Cython sources too: `pip install -e .` compiles the compiled
# modules (envs/sim/_native, envs/_native, envs/workloads/_native,
# baselines/_native), so a change to them means a rebuild.
NATIVE_SOURCES := $(wildcard envs/sim/_native/*.pyx envs/sim/_native/*.pxd envs/_native/*.pyx envs/workloads/_native/*.pyx baselines/_native/*.pyx baselines/_native/*.pxd)
$(VENV)/.installed: pyproject.toml setup.py $(NATIVE_SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) -m experiments.compare

test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy envs baselines agents experiments
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal

bench: install
	$(PY) -m experiments.bench

zoo-check: install
	$(PY) -m experiments.zoo_check agents=$(ZOO)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy envs baselines agents experiments
