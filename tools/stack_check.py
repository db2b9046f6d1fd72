"""make stack-check: on a git tree of this venv's torch/ files the newest
series touches plus PyTorch main's test/, with the series applied by
`git am -3`, each commit (a PR) that changes torch/ changes test/, and the
tests it adds or changes fail on the torch before it (but the controls) and
pass on its own. Writes build/stack-check/results.json for `make pr`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
from pathlib import Path

from tools import plumbing
from tools.plumbing import BUILD, MAIN, SHIMS, installed_series, junit, site_packages
from tools.prove import CONTROLS
from tools.upstream_test import make_tree, upstream_pytest
from torchpatch import snapshots, writes

WORK = BUILD / "stack-check"
HUNK = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def git(tree: Path, *args: str) -> str:
    return plumbing.git(tree, *args).stdout


def changed_tests(tree: Path, commit: str) -> dict[str, list[str]]:
    """{test file: the test functions commit adds or changes; [] for all}."""
    revs = (f"{commit}~", commit)
    new = git(tree, "diff", "--name-only", "--diff-filter=A", *revs, "--", "test")
    found: dict[str, list[str]] = {}
    for path in git(tree, "diff", "--name-only", *revs, "--", "test").split():
        lines: set[int] = set()
        for start, count in HUNK.findall(git(tree, "diff", "-U0", *revs, "--", path)):
            lines.update(range(int(start), int(start) + max(int(count or 1), 1)))
        module = ast.parse(git(tree, "show", f"{commit}:{path}"))
        found[path] = sorted(
            f.name
            for f in ast.walk(module)
            if isinstance(f, ast.FunctionDef)
            and f.name.startswith("test_")
            and lines & set(range(f.lineno, (f.end_lineno or 0) + 1))
            and path not in new.split()  # a new file: all of it
        )
    return found


def driver(tree: Path, path: str) -> str:
    """path if it is a test_*.py, else the test_*.py of its folder importing it."""
    file = tree / path
    if file.name.startswith("test_"):
        return path
    for candidate in sorted(file.parent.glob("test_*.py")):
        if re.search(rf"\b{re.escape(file.stem)}\b", candidate.read_text()):
            return str(candidate.relative_to(tree))
    raise SystemExit(f"stack-check: no test file of {file.parent} imports {path}")


def ran(python: Path, tree: Path, test: str, names: list[str]) -> dict[str, str]:
    """{class::test: passed | failed} of names (all if empty) in test's file."""
    selection = ["-k", " or ".join(names)] if names else []
    args = [*upstream_pytest(tree), test, *selection]
    env = dict(os.environ, PYTHONPATH=str(SHIMS))
    found = junit(args, python=python, cwd=tree, env=env)
    return {
        case: outcome if outcome in ("passed", "xfailed") else "failed"
        for case, outcome in found.items()
        # One of names, or a test parametrized from one.
        if not names
        or any(f"{case.rpartition('::')[2]}_".startswith(f"{n}_") for n in names)
    }


def main() -> int:
    install, found = installed_series()
    torch_files = [f for f in found.files if f.startswith("torch/")]
    problems: list[str] = []
    runs: list[dict[str, object]] = []
    with plumbing.venv_states(WORK) as pythons:
        site = site_packages(pythons["pristine"])
        tree = WORK / "tree"
        shutil.rmtree(tree, ignore_errors=True)
        make_tree(tree, site, torch_files, MAIN)
        git(tree, "init", "-q")
        git(tree, "add", "-A")
        git(tree, "commit", "-qm", "base")
        git(tree, "am", "-3", "--keep-non-patch", *(str(p.path) for p in found.patches))
        commits = git(tree, "rev-list", "--reverse", f"HEAD~{len(found.patches)}..HEAD")
        for number, commit in enumerate(commits.split(), 1):
            subject = git(tree, "log", "-1", "--format=%s", commit).strip()
            revs = (f"{commit}~", commit)
            torch = git(tree, "diff", "--name-only", *revs, "--", "torch")
            tests = changed_tests(tree, commit)
            print(f"{number}/{len(found.patches)} {subject}")
            if torch and not tests:
                problems.append(f"{subject}: changes torch/ and no test")
            for state, at in (("before", f"{commit}~"), ("after", commit)):
                # The torch/ files of the commit, written as torchpatch writes.
                new: snapshots.Snapshot = {
                    f: git(tree, "show", f"{at}:{f}").encode() for f in torch_files
                }
                writes.write(site, snapshots.read(site, torch_files), new)
                git(tree, "checkout", "-q", commit, "--", "test")
                for path, names in tests.items():
                    test = driver(tree, path)
                    results = ran(pythons["pristine"], tree, test, names)
                    if not results:
                        problems.append(f"{subject}: {path}: no test ran {state}")
                    for case, outcome in sorted(results.items()):
                        control = f"{CONTROLS}::" in case
                        expected = "passed" if state == "after" or control else "failed"
                        # A control may be an expected failure, before and after.
                        if outcome == "xfailed" and control:
                            outcome = "passed"
                        if outcome != expected:
                            problems.append(f"{subject}: {state}: {case} {outcome}")
                    values = list(results.values())
                    counts = {
                        o: values.count(o) for o in ("passed", "xfailed", "failed")
                    }
                    runs.append(
                        {
                            "commit": number,
                            "subject": subject,
                            "file": path,
                            "driver": test,
                            "tests": names,
                            "state": state,
                            **counts,
                        }
                    )
                    print(
                        f"  {state:6} {path}:",
                        ", ".join(f"{n} {o}" for o, n in counts.items()),
                    )
    record = {"torch": install.full_version, "runs": runs, "problems": problems}
    (WORK / "results.json").write_text(json.dumps(record, indent=2) + "\n")
    for problem in problems:
        print(f"stack-check: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
