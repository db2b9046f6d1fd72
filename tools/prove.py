"""Prove the series on this venv's torch, in each inlining mode, in a patched
and a pristine copy of the venv: patched, its test files pass; pristine, the
fix tests fail and the controls pass. Writes build/releases/<release>.json
for tools/release_table.py.

    python -m tools.prove [--extended]   # pristine: every file, not the PR's only
"""

from __future__ import annotations

import json
import os
import platform
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

FIX_TESTS = "HopModuleMutationErrorTests"
CONTROLS = "HopModuleMutationControlTests"


def era() -> str:
    """Which error the fix gives on this release."""
    import torch._dynamo.exc

    if hasattr(torch._dynamo.exc, "AttributeMutationError"):
        return "AttributeMutationError"
    return "graph break" + (", both modes" if switchable() else "")


def checkout() -> str:
    """HEAD, marked where tracked files differ."""
    commit = run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT).strip()
    changed = run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT)
    return f"{commit}+changes" if changed.strip() else commit


def ran(python: Path, selection: list[str], inline: str) -> dict[str, int]:
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
    python = platform.python_version()
    work = BUILD / "prove" / f"{install.version}-py{python}"
    with venv_states(work) as pythons:
        for inline in modes():
            patched = ran(pythons["patched"], tests, inline)
            fix, controls = (
                ran(
                    pythons["pristine"], [f"{t}::{cls}" for t in pristine_tests], inline
                )
                for cls in (FIX_TESTS, CONTROLS)
            )
            results["patched"][inline] = patched
            results["pristine"][inline] = {"fix": fix, "controls": controls}
            print(
                f"torch {install.version}, Python {python}, inlining={inline}: patched "
                f"{patched['passed']}/{patched['tests']} passed; pristine, fix "
                f"tests {fix['failures']}/{fix['tests']} failed, controls "
                f"{controls['passed']}/{controls['tests']} passed"
            )
            for what, got, want in (
                ("patched, not all passed", patched, "passed"),
                ("pristine, not every fix test failed", fix, "failures"),
                ("pristine, controls did not all pass", controls, "passed"),
            ):
                # An expected failure (unittest.expectedFailure) is as it should.
                expected = got[want] + (got["xfailed"] if want == "passed" else 0)
                if got["tests"] == 0 or expected != got["tests"]:
                    problems.append(f"inlining={inline}: {what}: {got}")
    record = {
        "release": install.version,
        "torch": install.full_version,
        "series": found.version,
        "python": python,
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
    (BUILD / "releases").mkdir(parents=True, exist_ok=True)
    (BUILD / "releases" / f"{install.version}.json").write_text(
        json.dumps(record, indent=2) + "\n"
    )
    for problem in problems:
        print(f"prove: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(extended="--extended" in sys.argv))
