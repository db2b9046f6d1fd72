"""Prove the series on the torch of this venv, and record what was found.

For the installed release, in each inlining mode it has (each in its own
process, with the mode switched by torchpatch's pytest plugin):

1. on the patched torch, every test file of the series must pass;
2. on the pristine torch (`torchpatch revert`), every test of the fix (the
   HopModuleMutationErrorTests classes) must fail and every control
   (HopModuleMutationControlTests) must pass (tools/teeth.py).

`--extended` runs step 2 on every test file of the series; without it, on
the files the pull request adds (the extended suites' fix tests take most of
the time, pristine, and were proven with the rest by `make test TORCH=all`).

The series is re-applied whatever happens. Writes build/releases/<release>.json
(release, series, era, modes, counts, date, commit), which `make test TORCH=all`
gathers into results/releases.json and README's table of releases.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import date

from tools.paths import BUILD, ROOT
from tools.run import torchpatch
from tools.teeth import check_pristine, run_tests
from torchpatch import bundle, series
from torchpatch.inline_mode import modes, switchable
from torchpatch.targets import InstalledTorch

OUT = BUILD / "releases"


def era() -> str:
    """Which error the fix gives on this release."""
    import torch._dynamo.exc

    if hasattr(torch._dynamo.exc, "AttributeMutationError"):
        return "AttributeMutationError"
    return "graph break" + (", both modes" if switchable() else "")


def checkout() -> str:
    """The commit the proof runs from, marked where tracked files differ."""
    git = ("git", "-C", str(ROOT))
    commit = subprocess.run(
        [*git, "rev-parse", "--short=12", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    changed = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return f"{commit}+changes" if changed else commit


def main(extended: bool) -> int:
    started = time.monotonic()
    install = InstalledTorch.find()
    found = series.load_series(bundle.data_root() / "patches", install.version)
    tests = [t.path for t in found.tests if t.runs]
    if not tests:
        print(f"prove: the torch {install.version} series lists no tests")
        return 1
    problems, patched = [], {}
    torchpatch("apply")
    for inline in modes():
        patched[inline] = counts = run_tests(tests, inline)
        print(
            f"patched torch {install.version}, inlining={inline}: "
            f"{counts['passed']}/{counts['tests']} passed"
        )
        if counts["tests"] == 0 or counts["passed"] != counts["tests"]:
            problems.append(f"inlining={inline}: patched, not all passed: {counts}")
    exported = [t.path for t in found.exported_tests if t.runs]
    pristine, found_problems = check_pristine(
        install.version, tests if extended else exported
    )
    problems += found_problems
    result = {
        "release": install.version,
        "torch": install.full_version,
        "series": found.version,
        "era": era(),
        "modes": modes(),
        "tests": tests,
        "pristine_tests": tests if extended else exported,
        "patched": patched,
        "pristine": pristine,
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
