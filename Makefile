# Every target runs for each supported torch (a patches/torch-<version>/series
# and requirements/torch-<version>.txt), each in its own .venvs/torch-<version>;
# TORCH=2.6.0 picks one.
#   make demo            the before/after of the fix
#   make test            every test, both inlining modes, and the teeth check
#   make upstream-test   PyTorch's own tests, pristine vs patched
#   make bench           the fix's cost in Dynamo tracing, in instructions
PYTHON ?= python3
SUPPORTED := $(sort $(patsubst patches/torch-%/series,%,$(wildcard patches/torch-*/series)))
TORCH ?= $(SUPPORTED)
# In a pattern rule's recipe $* is the torch version.
PY = .venvs/torch-$*/bin/python
PYTEST = $(PY) -m pytest -q -p no:cacheprovider -p no:logging
# tools/inline_mode.py makes TORCHDYNAMO_INLINE_INBUILT_NN_MODULES switch the
# mode on every release (2.6.0 and later ignore the variable).
IN_MODE = PYTHONPATH=tools TORCHDYNAMO_INLINE_INBUILT_NN_MODULES
LINTED := src tests test tools bench
FIRST := $(firstword $(TORCH))

.PHONY: venv demo test lint upstream-test bench clean
.PRECIOUS: .venvs/torch-%/.installed

venv: $(TORCH:%=.venvs/torch-%/.installed)

# Rebuilt only when the pins or the package change; pip reuses its cache.
.venvs/torch-%/.installed: requirements/torch-%.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv .venvs/torch-$*
	$(PY) -m pip install -q --disable-pip-version-check -r $<
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

demo: $(TORCH:%=demo-%)
demo-%: .venvs/torch-%/.installed
	$(PY) tools/demo.py

# The series' tests (listed in patches/torch-<version>/tests) run in each
# inlining mode the release has: off and on up to 2.11, always on from 2.12.
test: $(TORCH:%=test-%) lint
test-%: .venvs/torch-%/.installed
	$(PY) -m torchpatch apply
	$(PYTEST) tests
	for mode in $$($(PY) tools/inline_mode.py --modes); do \
	  $(IN_MODE)=$$mode $(PYTEST) -p inline_mode \
	    $$(grep -v '^#' patches/torch-$*/tests) || exit 1; \
	done
	$(PY) tools/teeth.py
	$(PY) bench/instructions.py --smoke --torch $*

lint: .venvs/torch-$(FIRST)/.installed
	.venvs/torch-$(FIRST)/bin/ruff check $(LINTED)
	.venvs/torch-$(FIRST)/bin/ruff format --check $(LINTED)

upstream-test: $(TORCH:%=upstream-test-%)
upstream-test-%: .venvs/torch-%/.installed
	$(PY) tools/upstream_test.py

# One run over every selected series: callgrind workers, one per core.
bench: venv
	$(PYTHON) bench/instructions.py --torch $(TORCH)

clean:
	rm -rf .venvs build
