"""make upstream-test: PyTorch's own tests on this venv's torch, pristine
against patched (docs/testing.md). On the wheel's torch/ plus the release's
test/ (PYTORCH_TESTS, else ../shared/upstream): the series' export applies and
gives the files torchpatch writes; each test of SEEDS it changes passes patched
only; FILES lose no test patched, in each inlining mode (a lost test that
passes in a rerun is flaky). Writes build/upstream-test/torch-<v>/results.json.
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
from pathlib import Path
from typing import Any

from tools.plumbing import (
    BUILD,
    SHIMS,
    UPSTREAM,
    installed_series,
    outcomes,
    pytest_command,
    run,
    site_packages,
    venv_states,
)
from tools.series_tests import with_tests
from torchpatch.inline_mode import modes
from torchpatch.series import Series, version_key

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
ENV = "TORCHDYNAMO_INLINE_INBUILT_NN_MODULES"
TIMEOUT = 3600  # seconds for one test file
RERUNS = 2  # reruns of a file whose patched run lost a test
RAN = re.compile(r"^Ran (\d+) tests? in ", re.MULTILINE)  # unittest's count


def find_tests(version: str) -> Path | None:
    if os.environ.get("PYTORCH_TESTS"):
        return Path(os.environ["PYTORCH_TESTS"]).resolve()
    names = [version, version.rpartition(".")[0]]
    if version_key(version)[:2] >= (2, 13):  # today's line: main's tests
        names.append("main")
    found = [UPSTREAM / f"pytorch-{name}" for name in names]
    return next((f for f in found if (f / "test" / "dynamo").is_dir()), None)


def make_tree(tree: Path, site: Path, files: list[str], tests: Path) -> None:
    """A writable tree of tests/test/ and files (under torch/) from site."""
    shutil.copytree(
        tests / "test", tree / "test", ignore=shutil.ignore_patterns("__pycache__")
    )
    for relpath in files:
        (tree / relpath).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(site / relpath, tree / relpath)
    for path in tree.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)


def apply_export(
    tree: Path, found: Series, patched: Path
) -> tuple[list[str], list[str]]:
    """Problems, and the tests of SEEDS whose files the export changes."""
    exported = tree.parent / "upstream.patch"
    exported.write_bytes(with_tests(found))
    run(["git", "apply", exported], cwd=tree)  # all or nothing, as --check says
    paths = set(re.findall(r"^diff --git a/\S+ b/(\S+)$", exported.read_text(), re.M))
    touched = sorted(p for p in paths if p.startswith("torch/"))
    print(
        f"export: `git apply` passes on wheel files + tests; {len(touched)} "
        "torch/ files equal the installed series'"
    )
    tests = "".join((tree / p).read_text() for p in paths if p.startswith("test/"))
    return [
        f"{path}: the exported patch and the series give different files"
        for path in touched
        if (tree / path).read_bytes() != (patched / path).read_bytes()
    ], [test for test in SEEDS if f"def {test}(" in tests]


def env(mode: str | None) -> dict[str, str]:
    """os.environ in mode, without CI (which puts run_tests() in PyTorch's CI
    mode: xmlrunner reports, lists of disabled tests)."""
    found = {k: v for k, v in os.environ.items() if k not in (ENV, "CI")}
    return {**found, "PYTHONDONTWRITEBYTECODE": "1", **({ENV: mode} if mode else {})}


def seed(
    test: str, tree: Path, pythons: dict[str, Path], report: list[Any]
) -> list[str]:
    """The patched tree's test passes on the patched torch only: literally with
    the variable unset, then in each mode through the runner that switches it."""
    problems = []
    command = f"python {SEEDS[test]} -k {test}"
    for mode in (None, *modes()):
        runner = [] if mode is None else ["-m", "torchpatch.inline_mode"]
        label = f"{ENV}={mode or '<unset>'}"
        for state, python in pythons.items():
            args = [str(python), *runner, SEEDS[test], "-k", test]
            proc = subprocess.run(
                args,
                cwd=tree,
                env=env(mode),
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            ran = RAN.search(proc.stderr)
            count = int(ran.group(1)) if ran else 0
            passed = proc.returncode == 0 and ran is not None
            outcome = "passed" if passed else "failed"
            print(f"seed: {command}: {state:<8} {label}: {outcome} (ran {count})")
            entry = dict(command=command, mode=mode, state=state, passed=passed)
            report.append({**entry, "ran": count})
            if count == 0:
                problems.append(f"seed {test} {state} {label}: ran no test")
            elif passed != (state == "patched"):
                problems.append(f"seed {test} {state} {label}: expected the opposite")
    return problems


def upstream_pytest(tree: Path) -> list[str]:
    """pytest's options for upstream's tests in tree, with the release shims
    (PYTHONPATH=SHIMS); this repository's pytest settings are not upstream's."""
    return ["-p", "release_shims", "-c", os.devnull, f"--rootdir={tree}"]


def run_file(
    python: Path, tree: Path, name: str, mode: str, report: Path
) -> subprocess.Popen[bytes]:
    """pytest on one test file of tree, writing a JUnit report; the process."""
    args = [*upstream_pytest(tree), f"--junitxml={report}", name]
    return subprocess.Popen(
        pytest_command(*args, python=python),
        # Not from the tree's root: its torch/ has no binaries.
        cwd=tree / "test",
        env=dict(env(mode), PYTHONPATH=str(SHIMS)),
        stdout=report.with_suffix(".log").open("w"),
        stderr=subprocess.STDOUT,
    )


def rerun_lost(
    lost: list[str], tree: Path, python: Path, name: str, mode: str, report: Path
) -> tuple[list[str], list[str]]:
    """(regressions, flaky): lost tests that fail in each rerun of the whole
    file, and those that pass in one (docs/testing.md says why)."""
    regressed = set(lost)
    for attempt in range(1, RERUNS + 1):
        again = report.with_name(f"{report.stem}-rerun{attempt}.xml")
        run_file(python, tree, name, mode, again).wait(timeout=TIMEOUT)
        passed = outcomes(again) if again.is_file() else {}
        regressed = {t for t in regressed if passed.get(t) != "passed"}
        if not regressed:
            break
    return sorted(regressed), [t for t in lost if t not in regressed]


def compare(
    trees: dict[str, Path],
    pythons: dict[str, Path],
    name: str,
    mode: str,
    report: list[Any],
) -> list[str]:
    """name's tests, pristine on pristine and patched on patched, side by side."""
    started = time.monotonic()
    stem = name.replace("/", "-").removesuffix(".py")
    xml = {state: trees[state].parent / f"{state}-{mode}-{stem}.xml" for state in trees}
    for proc in [run_file(pythons[s], trees[s], name, mode, xml[s]) for s in trees]:
        proc.wait(timeout=TIMEOUT)
    problems = [
        f"{name} {s} inlining={mode}: no report" for s in xml if not xml[s].is_file()
    ]
    found = {s: outcomes(xml[s]) if xml[s].is_file() else {} for s in xml}
    passed = {s: {t for t, o in found[s].items() if o == "passed"} for s in found}
    lost = sorted(passed["pristine"] - passed["patched"])
    gained = sorted(passed["patched"] - passed["pristine"])
    flaky: list[str] = []
    if lost:
        lost, flaky = rerun_lost(
            lost, trees["patched"], pythons["patched"], name, mode, xml["patched"]
        )
    counts = {s: Counter(found[s].values()) for s in found}
    shown = [
        f"{s} {c['passed']} passed / {c['failure']} failure / {c['error']} error / "
        f"{c['skipped']} skipped"
        for s, c in counts.items()
    ]
    print(
        f"inlining={mode} {name}: {'; '.join(shown)}; regressions: {len(lost)}, "
        f"flaky: {len(flaky)}, passing patched only: {len(gained)} "
        f"({time.monotonic() - started:.0f} s)"
    )
    for test in gained:
        print(f"  passing patched only, inlining={mode}: {test}")
    for test in flaky:
        print(f"  flaky, inlining={mode}: {test}: passed in a rerun of {name}")
    report.append(
        {
            "file": f"test/{name}",
            "mode": mode,
            "counts": {s: dict(c) for s, c in counts.items()},
            "regressions": lost,
            "flaky": flaky,
            "passing_patched_only": gained,
        }
    )
    return problems + [f"regression, inlining={mode}: {test}" for test in lost]


def main() -> int:
    install, found = installed_series()
    version = install.version
    print(f"== upstream tests, torch {version}")
    tests = find_tests(version)
    if tests is None:
        print(
            f"skipped: no test/dynamo/ for torch {version}: set PYTORCH_TESTS to a "
            f"folder holding one (a PyTorch {version} checkout), or add "
            f"{UPSTREAM}/pytorch-{version}/"
        )
        return 0
    work = BUILD / "upstream-test" / f"torch-{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    report: dict[str, Any] = {"seeds": [], "files": []}
    files = [f for f in found.files if f.startswith("torch/")]
    with venv_states(work) as pythons:
        trees = {state: work / f"tree-{state}" for state in pythons}
        for tree in trees.values():
            make_tree(tree, site_packages(pythons["pristine"]), files, tests)
        patched = site_packages(pythons["patched"])
        problems, seeds = apply_export(trees["patched"], found, patched)
        for test in seeds:
            problems += seed(test, trees["patched"], pythons, report["seeds"])
        if not seeds:
            print(f"seed: the torch {version} series changes none of SEEDS; skipped")
        for mode in modes():
            for name in FILES:
                if (trees["pristine"] / "test" / name).is_file():
                    problems += compare(trees, pythons, name, mode, report["files"])
    report.update(torch=version, tests=str(tests), problems=problems)
    (work / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    for problem in problems:
        print(f"upstream-test: {problem}", file=sys.stderr)
    print(f"torch {version}: {'FAILED' if problems else 'OK'} (logs in {work})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
