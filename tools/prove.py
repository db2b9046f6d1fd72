"""Prove the series on the torch of this venv, and record what was found.

For the installed release, in each inlining mode it has (each run in its own
process, the mode switched by torchpatch's pytest plugin), in a patched and
a pristine copy of this venv (plumbing.venv_states):

1. patched, every test file of the series must pass;
2. pristine, every test of the fix (the HopModuleMutationErrorTests
   classes) must fail, and every control (HopModuleMutationControlTests),
   which describes what already worked, must pass: the tests bite.

`--extended` runs step 2 on every test file of the series; without it, on
the files the pull request adds (the extended suites' fix tests take most of
the time, pristine, and were proven with the rest by `make test TORCH=all`).

Writes build/releases/<release>.json (release, series, era, modes, counts,
date, commit), which `make test TORCH=all` gathers into results/releases.json
and README's table of releases.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import date
from pathlib import Path

from tools.plumbing import (
    BUILD,
    ROOT,
    counts,
    installed_series,
    junit,
    run,
    venv_states,
)
from tools.series_tests import tests as series_tests
from torchpatch.inline_mode import modes, switchable

OUT = BUILD / "releases"
FIX_TESTS = "HopModuleMutationErrorTests"
CONTROLS = "HopModuleMutationControlTests"


def era() -> str:
    """Which error the fix gives on this release."""
    import torch._dynamo.exc

    if hasattr(torch._dynamo.exc, "AttributeMutationError"):
        return "AttributeMutationError"
    return "graph break" + (", both modes" if switchable() else "")


def checkout() -> str:
    """The commit the proof runs from, marked where tracked files differ."""
    commit = run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT).strip()
    changed = run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT)
    return f"{commit}+changes" if changed.strip() else commit


def ran(python: Path, selection: list[str], inline: str) -> dict[str, int]:
    """pytest's counts of selection, in a process with the given mode."""
    env = dict(os.environ, TORCHDYNAMO_INLINE_INBUILT_NN_MODULES=inline)
    return counts(junit(selection, python=python, env=env))


def main(extended: bool) -> int:
    started = time.monotonic()
    install, found = installed_series()
    listed = [t for t in series_tests(found) if t.runs]
    tests = [t.path for t in listed]
    pristine_tests = tests if extended else [t.path for t in listed if t.upstream]
    if not tests:
        print(f"prove: the torch {install.version} series lists no tests")
        return 1
    problems: list[str] = []
    results: dict[str, dict[str, object]] = {"patched": {}, "pristine": {}}
    with venv_states(BUILD / "prove" / install.version) as pythons:
        for inline in modes():
            patched = results["patched"][inline] = ran(
                pythons["patched"], tests, inline
            )
            fix, controls = (ran(pythons["pristine"], [f"{t}::{cls}" for t in pristine_tests],
                                 inline) for cls in (FIX_TESTS, CONTROLS))  # fmt: skip
            results["pristine"][inline] = {"fix": fix, "controls": controls}
            print(f"torch {install.version}, inlining={inline}: patched "
                  f"{patched['passed']}/{patched['tests']} passed; pristine, fix "
                  f"tests {fix['failures']}/{fix['tests']} failed, controls "
                  f"{controls['passed']}/{controls['tests']} passed")  # fmt: skip
            for what, got, want in (("patched, not all passed", patched, "passed"),
                                    ("pristine, not every fix test failed", fix,
                                     "failures"),
                                    ("pristine, controls did not all pass", controls,
                                     "passed")):  # fmt: skip
                if got["tests"] == 0 or got[want] != got["tests"]:
                    problems.append(f"inlining={inline}: {what}: {got}")
    result = {
        "release": install.version,
        "torch": install.full_version,
        "series": found.version,
        "era": era(),
        "modes": modes(),
        "tests": tests,
        "pristine_tests": pristine_tests,
        **results,
        "proven": not problems,
        "date": date.today().isoformat(),
        "commit": checkout(),
        "seconds": round(time.monotonic() - started),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{install.version}.json").write_text(json.dumps(result, indent=2) + "\n")
    for problem in problems:
        print(f"prove: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["--extended"]):
        raise SystemExit("usage: python -m tools.prove [--extended]")
    sys.exit(main(extended=sys.argv[1:] == ["--extended"]))
