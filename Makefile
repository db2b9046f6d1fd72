# Each target runs for a set of torch releases, each in its own
# .venvs/torch-<release> built from requirements/torch-<release>.txt:
#   TORCH unset      CI's tier (below); demo: DEMO_TORCH
#   TORCH=2.6.0      one release (or several, space-separated)
#   TORCH=all        every release a series serves (patches/*/releases)
#
#   make demo            the before/after of the fix
#   make test            every test, in each inlining mode, and the teeth check
#   make test-python     the newest series proven on another Python (3.13.0)
#   make property        the property test of nested HOPs, a large budget
#   make apply-check     every series applies to every release it serves
#   make series-check    every derived series equals its replay (make rebase)
#   make upstream-test   PyTorch's own tests, pristine vs patched
#   make stack-check     each PR of the stack: its tests fail before it, pass after
#   make bench           the fix's cost in Dynamo tracing, in instructions
#   make bench-calls     the Python calls it adds, without callgrind
#   make typecheck       mypy with upstream's settings: no new error
#   make pr              the pull request against main (build/pr/)
#   make rebase FROM=<series> TO=<release>   a series onto another release
PYTHON ?= python3
RELEASES := $(shell PYTHONPATH=src $(PYTHON) -c "from pathlib import Path; \
  from torchpatch.series import supported_versions as s; print(*s(Path('patches')))")
# CI's tier: the releases CI proves in full (PyTorch's own tests where
# ../shared/upstream has them, one release whose inlining flag is a justknob
# Config, the graph-break release whose flag still switches both modes, and
# the newest release). `make test TORCH=all` proves every release, one venv
# at a time.
TIER := 2.4.1 2.6.0 2.7.1 2.11.0 2.15.0
# The newest release, and one whose inlining flag still switches both modes.
DEMO_TORCH := 2.6.0 2.15.0
TORCH ?= $(TIER)
SELECTED := $(if $(filter all,$(TORCH)),$(RELEASES),$(TORCH))
NEWEST := $(lastword $(RELEASES))
# In a pattern rule's recipe $* is the torch release.
PY = .venvs/torch-$*/bin/python
PYTEST = $(PY) -m pytest -q -p no:cacheprovider -p no:logging
# A maintainer tool (tools/, a package run from this directory) with the
# machine's python, which reads torchpatch from src/.
TOOL = PYTHONPATH=src $(PYTHON) -m
LINTED := src tool_tests fix_tests tools

.PHONY: venv demo test test-all test-python property lint apply-check series-check upstream-test stack-check typecheck bench \
  bench-calls pr rebase rebase-continue clean
.PRECIOUS: .venvs/torch-%/.installed

venv: $(SELECTED:%=.venvs/torch-%/.installed)

# Rebuilt only when the pins or the package change; pip reuses its cache.
# The pins fix every version, so a machine-wide constraints file (one that
# caps torch, say) is not consulted.
.venvs/torch-%/.installed: requirements/torch-%.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv .venvs/torch-$*
	PIP_CONSTRAINT=/dev/null $(PY) -m pip install -q --disable-pip-version-check -r $<
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# The linters: this project's ruff and mypy, and those of tools/upstream_lint.py.
.venvs/lint/.installed: requirements/lint.txt
	test -x .venvs/lint/bin/python || $(PYTHON) -m venv .venvs/lint
	PIP_CONSTRAINT=/dev/null .venvs/lint/bin/python -m pip install -q --disable-pip-version-check -r $<
	touch $@

DEMO := $(if $(filter file,$(origin TORCH)),$(DEMO_TORCH),$(SELECTED))
demo: $(DEMO:%=demo-%)
demo-%: .venvs/torch-%/.installed
	$(PY) -m tools.demo

# For each release: the tool's tests; the series' tests patched, and its fix
# tests failing pristine, in each inlining mode the release has
# (tools/prove.py; pristine, the pull request's test file, or with
# EXTENDED=1 every test file); upstream's lint on what the series changes; a
# smoke run of the benchmark, which fails if a trace that refuses nothing
# calls the helper or moves its instruction ratio beyond its resolution.
ifeq ($(TORCH),all)
test: test-all
else
test: $(SELECTED:%=test-%) lint
endif
test-%: .venvs/torch-%/.installed .venvs/lint/.installed
	$(PY) -m torchpatch apply
	$(PYTEST) tool_tests
	$(PY) -m tools.prove $(if $(EXTENDED),--extended)
	$(PY) -m tools.upstream_lint
	$(PY) -m tools.bench.instructions --smoke --torch $*

# The newest series on another Python that torch serves (PY_VERSION, pyenv's
# ~/.pyenv/versions/<PY_VERSION>; 3.13.0 unless set): proven as `make test`
# proves it (tools/prove.py), in a venv of its own from the same pins,
# .venvs/torch-<newest>-py<PY_VERSION>. Fails, saying so, where the
# interpreter is missing.
PY_VERSION ?= 3.13.0
PYENV_PYTHON := $(HOME)/.pyenv/versions/$(PY_VERSION)/bin/python
PY_VENV := .venvs/torch-$(NEWEST)-py$(PY_VERSION)
test-python: $(PY_VENV)/.installed
	$(PY_VENV)/bin/python -m torchpatch apply
	$(PY_VENV)/bin/python -m tools.prove
$(PY_VENV)/.installed: requirements/torch-$(NEWEST).txt pyproject.toml
	@test -x $(PYENV_PYTHON) || { echo "test-python: no Python $(PY_VERSION)" \
	  "at $(PYENV_PYTHON) (pyenv install $(PY_VERSION), or set PY_VERSION)" >&2; exit 1; }
	test -x $(PY_VENV)/bin/python || $(PYENV_PYTHON) -m venv $(PY_VENV)
	PIP_CONSTRAINT=/dev/null $(PY_VENV)/bin/python -m pip install -q --disable-pip-version-check -r $<
	$(PY_VENV)/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# fix_tests/test_hop_mutation_property.py with PROPERTY_EXAMPLES random
# examples (2000 unless set) instead of its fixed derandomized ones, patched:
# the newest release unless TORCH says. About 0.4 s an example here.
PROPERTY_EXAMPLES ?= 2000
PROPERTY := $(if $(filter file,$(origin TORCH)),$(NEWEST),$(SELECTED))
property: $(PROPERTY:%=property-%)
property-%: .venvs/torch-%/.installed
	$(PY) -m torchpatch apply
	HOP_MUTATION_PROPERTY_EXAMPLES=$(PROPERTY_EXAMPLES) $(PYTEST) -s fix_tests/test_hop_mutation_property.py

# Every release, JOBS at a time (default 1; JOBS=2 runs one a core, with two
# CUDA venvs on disk): a venv this run built is removed after its release is
# proven, so that the disk holds JOBS CUDA builds at a time. Each release's
# output goes to build/test-all/<release>.log; a failed release fails the
# run once the others are done. Records the run in results/releases.json and
# README's table.
JOBS ?= 1
test-all: lint apply-check
	rm -rf build/releases build/test-all
	tools/per_release.sh $(JOBS) build/test-all test EXTENDED=1 -- $(RELEASES)
	$(TOOL) tools.release_table --record

lint: .venvs/lint/.installed
	.venvs/lint/bin/ruff check $(LINTED)
	.venvs/lint/bin/ruff format --check $(LINTED)
	MYPYPATH=src .venvs/lint/bin/mypy -p torchpatch -p tools
	$(TOOL) tools.series_tests --check
	$(TOOL) tools.release_table --check
	$(TOOL) tools.bench.instructions --report --check
	$(TOOL) tools.no_copies

# Each series against the torch/_dynamo of the wheel of every release it
# serves, taken from pip's cache (or PyPI): applies, and reverts to RECORD.
apply-check:
	$(TOOL) tools.apply_check $(RELEASES)

# Each series that `make rebase` derives from another (its HEADER's
# Rebased-From, Origin "rebased with git am -3") is replayed from its parent
# with its recorded conflict resolutions (patches/torch-*/rerere/), and must
# equal the series in patches/ (tools/series_check.py).
series-check:
	$(TOOL) tools.series_check

# CI's tier: the pull request's release with main's tests (2.15.0). The
# older eras' runs, 2.6.0 with its release's tests and 2.4.1 with the
# 2.4-era files (2.7.1 and 2.11.0 have no test tree here), are left to
# TORCH=2.6.0, TORCH=2.4.1 or TORCH=all, to keep CI well under an hour.
UPSTREAM_TIER := 2.15.0
UPSTREAM := $(if $(filter file,$(origin TORCH)),$(UPSTREAM_TIER),$(SELECTED))
upstream-test: $(UPSTREAM:%=upstream-test-%)
upstream-test-%: .venvs/torch-%/.installed
	$(PY) -m tools.upstream_test

# The pull request (the newest series), commit by commit: each commit that
# changes torch/ changes test/, and the tests it adds or changes fail on the
# torch before it and pass on its own (tools/stack_check.py). 4 minutes here.
stack-check: .venvs/torch-$(NEWEST)/.installed
	.venvs/torch-$(NEWEST)/bin/python -m tools.stack_check

# mypy with upstream's settings over the files a series touches, following
# their imports through all of torch, pristine against patched
# (tools/typecheck.py): the newest release unless TORCH says. 7 minutes on
# 2.15.0 here (two mypy runs of 3.5 minutes); not in CI.
TYPECHECK := $(if $(filter file,$(origin TORCH)),$(NEWEST),$(SELECTED))
typecheck: $(TYPECHECK:%=typecheck-%)
typecheck-%: .venvs/torch-%/.installed .venvs/lint/.installed
	$(PY) -m tools.typecheck

# One run over every selected release: callgrind workers, one per core.
bench: venv
	$(TOOL) tools.bench.instructions --torch $(SELECTED)

# Python calls the series adds to each workload's trace, without callgrind:
# a release at a time, JOBS at once, a venv this run built removed after,
# each release's rows replaced in results/bench/calls.json.
bench-calls:
	tools/per_release.sh $(JOBS) build/bench-calls bench-calls -- $(SELECTED)
bench-calls-%: .venvs/torch-%/.installed
	$(TOOL) tools.bench.instructions --calls --torch $*

# The pull request against main: the newest release's series, exported, and
# its description with a before/after table from a real run (build/pr/).
# The checks its test plan reports run first, on this series (about 20
# minutes here): a body never cites a result of another series.
pr: stack-check upstream-test-$(NEWEST) typecheck-$(NEWEST) .venvs/lint/.installed
	.venvs/torch-$(NEWEST)/bin/python -m tools.upstream_lint
	.venvs/torch-$(NEWEST)/bin/python -m tools.pr

# Maintainers: replay patches/torch-FROM onto release TO with git's
# three-way merge and write patches/torch-TO/ and its pins, then prove it
# (tools/rebase.py). DEST=<dir> writes the series there instead, unproven;
# PROVE=0 skips the proof. On a conflict it writes nothing: resolve it in
# the scratch repository it names, then `make rebase-continue FROM= TO=`.
rebase:
	$(TOOL) tools.rebase $(FROM) $(TO) \
	  $(if $(DEST),--dest $(DEST)) $(if $(filter 0,$(PROVE)),--no-prove)
rebase-continue:
	$(TOOL) tools.rebase --continue $(FROM) $(TO)

clean:
	rm -rf .venvs build
