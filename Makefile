# kimina-edu — every target installs what it needs into .venv on a fresh machine.
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
VERL_VENV := .venv-verl

.PHONY: help install course smoke test lab bench verl-check lint clean

help:
	@echo "make course      run every notebook headless into runs/<timestamp>/ (full sizes, CPU ok)"
	@echo "make test        unit tests + every notebook in SMOKE mode"
	@echo "make lab         JupyterLab on notebooks/"
	@echo "make bench       every script under benchmarks/, one table of ratios (runs/bench.json)"
	@echo "make verl-check  separate .venv-verl with verl 0.9.1; checks chapter 8's wiring"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(STAMP)

course: $(STAMP)
	$(PY) -m kimina_edu.course

smoke: $(STAMP)
	$(PY) -m kimina_edu.course --smoke

test: $(STAMP) $(VERL_VENV)/.installed
	$(PY) -m pytest tests -ra --durations=15
	$(VERL_VENV)/bin/python -m kimina_edu.verl.check

lab: $(STAMP)
	$(PY) -m pip install -q -e ".[test,lab]"
	$(VENV)/bin/jupyter lab notebooks/

bench: $(STAMP)
	$(PY) -m benchmarks.run_all

lint: $(STAMP)
	$(VENV)/bin/ruff check kimina_edu tests benchmarks

# verl 0.9.1 pins trl==0.27 and transformers<5.11, which clash with TRL 1.x: own venv.
$(VERL_VENV)/.installed: kimina_edu/verl/requirements-verl.txt kimina_edu/verl/constraints-verl.txt
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VERL_VENV)/bin/python -m pip install -q -r kimina_edu/verl/requirements-verl.txt -c kimina_edu/verl/constraints-verl.txt
	$(VERL_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

verl-check: $(VERL_VENV)/.installed
	$(VERL_VENV)/bin/python -m kimina_edu.verl.check

clean:
	rm -rf runs .pytest_cache
