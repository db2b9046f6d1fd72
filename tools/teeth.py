"""Prove the fix's tests bite: on the pristine torch they must all fail.

Reverts the series, runs test/dynamo/test_hop_mutation.py in both inlining
modes and requires every test of the fix (HopModuleMutationErrorTests) to
fail and every control (HopModuleMutationControlTests) to pass, since the
controls describe what already worked before the fix. Re-applies the series
whatever happens.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_FILE = "test/dynamo/test_hop_mutation.py"
FIX_TESTS = f"{TEST_FILE}::HopModuleMutationErrorTests"
CONTROLS = f"{TEST_FILE}::HopModuleMutationControlTests"


def torchpatch(command: str) -> None:
    subprocess.run([sys.executable, "-m", "torchpatch", command], check=True)


def run_tests(selection: str, inline: str) -> dict[str, int]:
    """pytest's counts for selection, in a process with the given mode."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        env = dict(
            os.environ,
            TORCHDYNAMO_INLINE_INBUILT_NN_MODULES=inline,
            PYTHONPATH=str(ROOT / "tools"),
        )
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "no:logging", "-p", "inline_mode", f"--junitxml={report}",
             selection],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        suite = ET.parse(report).getroot().find("testsuite")
    counts = {
        k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")
    }
    counts["passed"] = (
        counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    )
    return counts


def main() -> int:
    problems = []
    torchpatch("revert")
    try:
        for inline in ("0", "1"):
            fix = run_tests(FIX_TESTS, inline)
            controls = run_tests(CONTROLS, inline)
            print(
                f"pristine torch, inlining={inline}: "
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
    for problem in problems:
        print(f"teeth: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
