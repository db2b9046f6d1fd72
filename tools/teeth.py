"""The fix's tests bite: on the pristine torch they must all fail.

check_pristine() reverts the series, runs the given test files in each
inlining mode the release has, and requires every test of the fix (the
HopModuleMutationErrorTests classes) to fail and every control
(HopModuleMutationControlTests) to pass, since the controls describe what
already worked before the fix. It re-applies the series whatever happens.
tools/prove.py runs it after the patched tests.
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tools.run import pytest, torchpatch
from torchpatch.inline_mode import modes

FIX_TESTS = "HopModuleMutationErrorTests"
CONTROLS = "HopModuleMutationControlTests"


def run_tests(selection: list[str], inline: str) -> dict[str, int]:
    """pytest's counts for selection, in a process with the given mode."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        env = dict(os.environ, TORCHDYNAMO_INLINE_INBUILT_NN_MODULES=inline)
        pytest(f"--junitxml={report}", *selection, env=env)
        suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None, f"{report} has no testsuite"
    counts = {
        k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")
    }
    counts["passed"] = (
        counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    )
    return counts


def check_pristine(version: str, tests: list[str]) -> tuple[dict[str, Any], list[str]]:
    """({mode: counts of the fix tests and the controls}, problems), measured
    on the reverted torch; the series is re-applied whatever happens."""
    results, problems = {}, []
    torchpatch("revert")
    try:
        for inline in modes():
            fix = run_tests([f"{t}::{FIX_TESTS}" for t in tests], inline)
            controls = run_tests([f"{t}::{CONTROLS}" for t in tests], inline)
            results[inline] = {"fix": fix, "controls": controls}
            print(
                f"pristine torch {version}, inlining={inline}: "
                f"fix tests {fix['failures']}/{fix['tests']} failed, "
                f"controls {controls['passed']}/{controls['tests']} passed"
            )
            if fix["tests"] == 0 or fix["failures"] != fix["tests"]:
                problems.append(f"inlining={inline}: not every fix test failed: {fix}")
            if controls["tests"] == 0 or controls["passed"] != controls["tests"]:
                problems.append(
                    f"inlining={inline}: controls did not all pass: {controls}"
                )
    finally:
        torchpatch("apply")
    return results, problems
