"""make upstream-test: PyTorch's own tests on the pristine and the patched torch.

For the torch of this interpreter, with the release's `test/` from
PYTORCH_TESTS (a folder holding `test/dynamo/`, such as a PyTorch checkout
of that release) or else the matching folder of ../shared/upstream/
(`pytorch-<version>`, then `pytorch-<major>.<minor>`; for today's line,
2.13 and later, which has no release test tree there, `pytorch-main`):

1. export: two trees, each the wheel's torch/ sources plus those tests;
   the series' export with its tests (tools/series_tests.py) must pass
   `git apply --check` on one and is applied
   to it, and its torch/ files must then equal what `torchpatch apply`
   writes into the install.
2. seeds: for each test of SEEDS that the export changes (test_map_side_effects,
   the upstream test of #126355, and the test of 2.15.0's 0003's graph break;
   0001's test needs the shim below, so tools/stack_check.py runs it), its
   file's own driver, `python test/dynamo/test_misc.py -k
   test_map_side_effects` as PyTorch's CI and the issue run it, on the
   patched tree passes on the patched torch and fails on the pristine one:
   with TORCHDYNAMO_INLINE_INBUILT_NN_MODULES unset, literally, then set to
   each mode of the release (run through torchpatch.inline_mode, since
   2.6.0 and later ignore the variable).
3. regressions: each of FILES that the folder has, in each mode, the
   pristine tree's tests on the pristine torch against the patched tree's
   on the patched torch, test by test. A test that passes pristine and
   does not pass patched, then does not pass either in RERUNS more runs of
   its file on the patched torch, fails the step; one that passes in a
   rerun is printed as flaky. The counts are printed.

Pristine and patched run side by side, each in a hard-linked copy of this
virtualenv (torchpatch replaces files, so the copies never share a patched
one). Main's tests need one shim on a released torch, which the harness
loads as a pytest plugin (tools/shims/release_shims.py), never an edit of
the upstream files. With no test folder it says what it skipped and why,
and passes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.plumbing import (
    BUILD,
    SHIMS,
    STATES,
    UPSTREAM as SHARED,
    installed_series,
    outcomes,
    pytest_command,
    run,
    site_packages,
    venv_states,
)
from tools.series_tests import with_tests
from torchpatch.inline_mode import modes
from torchpatch.series import version_key

WORK = BUILD / "upstream-test"
# Under test/; each runs where the test folder has it.
FILES = (
    "dynamo/test_misc.py",
    "dynamo/test_higher_order_ops.py",
    "dynamo/test_autograd_function.py",
    "dynamo/test_modules.py",
    "dynamo/test_activation_checkpointing.py",
    "higher_order_ops/test_invoke_subgraph.py",
)
# {test: the file whose driver runs it}: upstream tests a series changes.
SEEDS = {
    "test_map_side_effects": "test/dynamo/test_misc.py",
    "test_side_effect_with_aliased_intermediate": (
        "test/higher_order_ops/test_invoke_subgraph.py"
    ),
}
TODAYS_LINE = (2, 13)  # releases from here on run pytorch-main's tests
ENV = "TORCHDYNAMO_INLINE_INBUILT_NN_MODULES"
TIMEOUT = 3600  # seconds for one test file
# What the run found, written to <work>/results.json for `make pr`.
REPORT: dict[str, Any] = {"seeds": [], "files": []}
RERUNS = 2  # reruns of a file whose patched run lost a test


def find_tests(version: str) -> Path | None:
    if os.environ.get("PYTORCH_TESTS"):
        return Path(os.environ["PYTORCH_TESTS"]).resolve()
    major_minor = ".".join(version.split(".")[:2])
    names = [f"pytorch-{version}", f"pytorch-{major_minor}"]
    if version_key(version)[:2] >= TODAYS_LINE:
        names.append("pytorch-main")
    for name in names:
        if (SHARED / name / "test" / "dynamo").is_dir():
            return SHARED / name
    return None


def make_tree(tree: Path, torch_root: Path, tests: Path) -> None:
    """The wheel's torch/ sources (with the graph-break registry) and the
    release's test/."""

    def not_sources(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n == "__pycache__"
            or (not n.endswith((".py", ".json")) and not (Path(folder) / n).is_dir())
        ]

    shutil.copytree(torch_root / "torch", tree / "torch", ignore=not_sources)
    shutil.copytree(tests / "test", tree / "test",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for path in tree.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)


def apply_export(tree: Path, patched: Path) -> tuple[list[str], list[str]]:
    """Problems, and the tests of SEEDS whose files the export changes."""
    exported = tree.parent / "upstream.patch"
    exported.write_bytes(with_tests(installed_series()[1]))
    run(["git", "apply", "--check", exported], cwd=tree)
    run(["git", "apply", exported], cwd=tree)
    paths = sorted(
        {
            line.split()[-1][2:]
            for line in exported.read_text().splitlines()
            if line.startswith("diff --git a/")
        }
    )
    touched = [path for path in paths if path.startswith("torch/")]
    problems = [
        f"{path}: the exported patch and the series give different files"
        for path in touched
        if (tree / path).read_bytes() != (patched / path).read_bytes()
    ]
    print(f"export: `git apply --check` passes on wheel torch/ + tests; "
          f"{len(touched)} torch/ files equal the installed series'")  # fmt: skip
    tests = [path for path in paths if path.startswith("test/")]
    seeds = [
        test
        for test in SEEDS
        if any(f"def {test}(" in (tree / path).read_text() for path in tests)
    ]
    return problems, seeds


def mode_env(mode: str | None) -> dict[str, str]:
    # CI=true puts PyTorch's run_tests() into PyTorch's own CI mode (xmlrunner
    # reports, lists of disabled tests): run them as a developer does.
    env = {k: v for k, v in os.environ.items() if k not in (ENV, "CI")}
    if mode is not None:
        env[ENV] = mode
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def seed(test: str, tree: Path, pythons: dict[str, Path]) -> list[str]:
    """The patched tree's test passes on the patched torch only."""
    problems = []
    command = [SEEDS[test], "-k", test]
    for mode in (None, *modes()):
        # Unset, the command is the literal one; a mode goes through the
        # runner that switches it.
        runner = [] if mode is None else ["-m", "torchpatch.inline_mode"]
        for state, python in pythons.items():
            proc = subprocess.run(
                [python, *runner, *command], cwd=tree, env=mode_env(mode),
                capture_output=True, text=True, timeout=TIMEOUT,
            )  # fmt: skip
            ran = re.search(r"^Ran (\d+) tests? in ", proc.stderr, re.MULTILINE)
            passed = proc.returncode == 0 and ran is not None
            label = f"{ENV}={mode or '<unset>'}"
            print(f"seed: python {' '.join(command)}: {state:<8} {label}: "
                  f"{'passed' if passed else 'failed'}"
                  f" (ran {ran.group(1) if ran else 'nothing'})")  # fmt: skip
            REPORT["seeds"].append({"command": f"python {' '.join(command)}",
                                    "mode": mode, "state": state, "passed": passed,
                                    "ran": int(ran.group(1)) if ran else 0})  # fmt: skip
            if ran is None or ran.group(1) == "0":
                problems.append(f"seed {test} {state} {label}: ran no test")
            elif passed != (state == "patched"):
                problems.append(f"seed {test} {state} {label}: expected the opposite")
    return problems


def run_file(
    python: Path, tree: Path, name: str, mode: str, report: Path
) -> subprocess.Popen[bytes]:
    """pytest on one test file of tree, writing a JUnit report; the process."""
    log = report.with_suffix(".log").open("w")
    env = dict(mode_env(mode), PYTHONPATH=str(SHIMS))
    return subprocess.Popen(
        pytest_command(
            "-p", "release_shims",
            # This repository's pytest settings are not upstream's.
            "-c", os.devnull, f"--rootdir={tree}", f"--junitxml={report}", name,
            python=python,
        ),
        # Not from the tree's root: its torch/ has no binaries.
        cwd=tree / "test", env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def rerun_lost(lost: list[str], tree: Path, python: Path, name: str, mode: str,
               report: Path) -> tuple[list[str], list[str]]:  # fmt: skip
    """(regressions, flaky): lost tests that fail again, and those that pass.

    Each rerun is the whole file again in a new process, so a test keeps the
    tests that ran before it; only the heap layout (addresses, hence id()s)
    differs. A test that passes in any rerun is flaky, not a regression: a
    patch changes what Dynamo does with the same program the same way every
    time. Seen: test_autograd_function's test_allow_in_graph leaves the id()
    of its local autograd.Function in trace_rules._allowed_callable_ids, and
    a later test's local Function allocated at that address is put in the
    graph as allowed: nothing of the series is involved, only where the
    allocator puts things (seen patched, in about one run in ten).
    """
    regressed = set(lost)
    for attempt in range(1, RERUNS + 1):
        again = report.with_name(f"{report.stem}-rerun{attempt}.xml")
        run_file(python, tree, name, mode, again).wait(timeout=TIMEOUT)
        passed = outcomes(again) if again.is_file() else {}
        regressed = {t for t in regressed if passed.get(t) != "passed"}
        if not regressed:
            break
    flaky = [t for t in lost if t not in regressed]
    return sorted(regressed), flaky


def regressions(trees: dict[str, Path], pythons: dict[str, Path]) -> list[str]:
    problems = []
    files = [f for f in FILES if (trees["pristine"] / "test" / f).is_file()]
    for mode in modes():
        for name in files:
            started = time.monotonic()
            procs, reports = {}, {}
            for state, python in pythons.items():
                stem = name.replace("/", "-").removesuffix(".py")
                reports[state] = trees[state].parent / f"{state}-{mode}-{stem}.xml"
                procs[state] = run_file(
                    python, trees[state], name, mode, reports[state]
                )
            for proc in procs.values():
                proc.wait(timeout=TIMEOUT)
            found: dict[str, dict[str, str]] = {}
            for state, report in reports.items():
                if not report.is_file():
                    problems.append(f"{name} {state} inlining={mode}: no report")
                    found[state] = {}
                    continue
                found[state] = outcomes(report)
            lost = sorted(
                test
                for test, outcome in found["pristine"].items()
                if outcome == "passed" and found["patched"].get(test) != "passed"
            )
            gained = sorted(
                test
                for test, outcome in found["patched"].items()
                if outcome == "passed" and found["pristine"].get(test) != "passed"
            )
            flaky: list[str] = []
            if lost:
                lost, flaky = rerun_lost(lost, trees["patched"], pythons["patched"],
                                         name, mode, reports["patched"])  # fmt: skip
            counts = {s: Counter(found[s].values()) for s in found}
            print(f"inlining={mode} {name}: "
                  + "; ".join(f"{s} {_counts(c)}" for s, c in counts.items())
                  + f"; regressions: {len(lost)}"
                  + (f", flaky: {len(flaky)}" if flaky else "")
                  + f", passing patched only: {len(gained)}"
                  + f" ({time.monotonic() - started:.0f} s)")  # fmt: skip
            for test in gained:
                print(f"  passing patched only, inlining={mode}: {test}")
            REPORT["files"].append({"file": f"test/{name}", "mode": mode,
                                    "counts": {s: dict(c) for s, c in counts.items()},
                                    "regressions": lost, "flaky": flaky,
                                    "passing_patched_only": gained})  # fmt: skip
            for test in flaky:
                print(f"  flaky, inlining={mode}: {test}: did not pass patched, "
                      f"then passed in a rerun of {name}")  # fmt: skip
            problems += [f"regression, inlining={mode}: {test}" for test in lost]
    return problems


def _counts(counter: Counter[str]) -> str:
    return " / ".join(f"{counter[k]} {k}" for k in ("passed", "failure", "error",
                                                    "skipped"))  # fmt: skip


def main() -> int:
    version = metadata.version("torch").split("+")[0]
    print(f"== upstream tests, torch {version}")
    tests = find_tests(version)
    if tests is None:
        print(f"skipped: no test/dynamo/ for torch {version}: set PYTORCH_TESTS to a "
              f"folder holding one (a PyTorch {version} checkout), or add "
              f"{SHARED}/pytorch-{version}/")  # fmt: skip
        return 0
    work = WORK / f"torch-{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with venv_states(work) as pythons:
        trees = {state: work / f"tree-{state}" for state in STATES}
        for tree in trees.values():
            make_tree(tree, site_packages(pythons["pristine"]), tests)
        problems, seeds = apply_export(
            trees["patched"], site_packages(pythons["patched"])
        )
        for test in seeds:
            problems += seed(test, trees["patched"], pythons)
        if not seeds:
            print(f"seed: the torch {version} series changes none of "
                  f"{', '.join(SEEDS)}; skipped")  # fmt: skip
        problems += regressions(trees, pythons)
    REPORT.update(torch=version, tests=str(tests), problems=problems)
    (work / "results.json").write_text(json.dumps(REPORT, indent=2) + "\n")
    for problem in problems:
        print(f"upstream-test: {problem}", file=sys.stderr)
    print(f"torch {version}: {'FAILED' if problems else 'OK'} (logs in {work})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
