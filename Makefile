# make demo: the before/after of the fix. make test: every test, both modes.
# make bench: the fix's cost in Dynamo tracing time.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCHPATCH := $(VENV)/bin/torchpatch
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
LINTED := src tests test tools bench

.PHONY: venv demo test bench clean

venv: $(VENV)/.installed

# Rebuilt only when the pins or the package change; pip reuses its cache.
$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

demo: venv
	$(PY) tools/demo.py

test: venv
	$(TORCHPATCH) apply
	$(PYTEST) tests
	TORCHDYNAMO_INLINE_INBUILT_NN_MODULES=0 $(PYTEST) test/dynamo
	TORCHDYNAMO_INLINE_INBUILT_NN_MODULES=1 $(PYTEST) test/dynamo
	$(PY) tools/teeth.py
	$(PY) bench/trace_overhead.py --smoke
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

# Patched vs pristine tracing time, interleaved in one run (a few minutes).
bench: venv
	$(PY) bench/trace_overhead.py

clean:
	rm -rf $(VENV)
