"""make stack-check: each PR of the stack brings its own tests, and they bite.

The newest series is the pull request, one commit a PR (as ghstack sends
them). On the torch of this interpreter it builds a git tree of the wheel's
torch/ files that the series touches (pristine) and PyTorch main's test/
(../shared/upstream/pytorch-main), applies the series with `git am -3`, and
for each commit:

- a commit that changes torch/ must change test/;
- the tests it adds or changes (each test function one of its test lines
  falls in, run through the test file of the folder that imports it, as
  upstream's CI runs it) must pass on the torch of the commit, and fail on
  the torch of the commit before it (with the commit's tests), except
  HopModuleMutationControlTests, which describe what already worked and
  pass on both.

The torch states are the pristine hard-linked copy of this virtualenv
(plumbing.venv_states), whose touched files torchpatch's writer replaces,
so the original venv is never written. Prints a line per commit and state,
and writes build/stack-check/results.json for `make pr`.

    python -m tools.stack_check     # with the newest release's venv python
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
from tools.plumbing import BUILD, MAIN as UPSTREAM, SHIMS, installed_series, junit
from tools.prove import CONTROLS
from torchpatch import series, snapshots, writes

WORK = BUILD / "stack-check"
HUNK = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def git(tree: Path, *args: str) -> str:
    return plumbing.git(tree, *args).stdout


def make_tree(tree: Path, site: Path, found: series.Series) -> list[str]:
    """The tree with the series applied: its commits, oldest first."""
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(UPSTREAM / "test", tree / "test")
    for relpath in found.files:
        if relpath.startswith("torch/"):
            (tree / relpath).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(site / relpath, tree / relpath)
    for path in tree.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "base")
    git(tree, "am", "-3", "--keep-non-patch", *(str(p.path) for p in found.patches))
    return git(
        tree, "rev-list", "--reverse", "HEAD~" + str(len(found.patches)) + "..HEAD"
    ).split()


def changed_tests(tree: Path, commit: str) -> dict[str, list[str]]:
    """{test file: the test functions the commit adds or changes in it}; a
    file the commit adds maps to [] (all of it)."""
    found: dict[str, list[str]] = {}
    added = set(
        git(
            tree,
            "diff",
            "--name-only",
            "--diff-filter=A",
            f"{commit}~",
            commit,
            "--",
            "test",
        ).split()
    )
    for path in git(
        tree, "diff", "--name-only", f"{commit}~", commit, "--", "test"
    ).split():
        if path in added:
            found[path] = []
            continue
        diff = git(tree, "diff", "-U0", f"{commit}~", commit, "--", path)
        lines = {
            n
            for start, count in HUNK.findall(diff)
            for n in range(int(start), int(start) + max(int(count or 1), 1))
        }
        module = ast.parse(git(tree, "show", f"{commit}:{path}"))
        found[path] = sorted(
            node.name
            for node in ast.walk(module)
            if isinstance(node, ast.FunctionDef)
            and node.name.startswith("test_")
            and lines & set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        )
    return found


def driver(tree: Path, path: str) -> str:
    """The test file that runs path's tests: itself, or the test_*.py of its
    folder that imports it."""
    file = tree / path
    if file.name.startswith("test_"):
        return path
    for candidate in sorted(file.parent.glob("test_*.py")):
        if re.search(rf"\b{re.escape(file.stem)}\b", candidate.read_text()):
            return str(candidate.relative_to(tree))
    raise SystemExit(f"stack-check: no test file of {file.parent} imports {path}")


def install(tree: Path, commit: str, site: Path, files: list[str]) -> None:
    """Write the torch/ files of commit into site, as torchpatch writes."""
    new: snapshots.Snapshot = {
        f: git(tree, "show", f"{commit}:{f}").encode() for f in files
    }
    writes.write(site, snapshots.read(site, files), new)


def outcomes(python: Path, tree: Path, test: str, names: list[str]) -> dict[str, str]:
    """{class::test: passed | failed} of names (all if empty) in test's file."""
    selection = ["-k", " or ".join(names)] if names else []
    found = junit(["-p", "release_shims", "-c", os.devnull, f"--rootdir={tree}", test,
                   *selection], python=python, cwd=tree,
                  env=dict(os.environ, PYTHONPATH=str(SHIMS)))  # fmt: skip

    def selected(case: str) -> bool:
        name = case.rpartition("::")[2]
        return not names or any(name == n or name.startswith(n + "_") for n in names)

    # upstream's outcome, as this check counts it: passed or failed.
    return {
        case: "passed" if outcome == "passed" else "failed"
        for case, outcome in found.items()
        if selected(case)
    }


def main() -> int:
    install_, found = installed_series()
    problems: list[str] = []
    WORK.mkdir(parents=True, exist_ok=True)
    with plumbing.venv_states(WORK) as pythons:
        python = pythons["pristine"]
        site = plumbing.site_packages(python)
        tree = WORK / "tree"
        commits = make_tree(tree, site, found)
        runs: list[dict[str, object]] = []
        torch_files = [f for f in found.files if f.startswith("torch/")]
        for number, commit in enumerate(commits, 1):
            subject = git(tree, "log", "-1", "--format=%s", commit).strip()
            touched = git(tree, "diff", "--name-only", f"{commit}~", commit).split()
            tests = changed_tests(tree, commit)
            print(f"{number}/{len(commits)} {subject}")
            if any(f.startswith("torch/") for f in touched) and not tests:
                problems.append(f"{subject}: changes torch/ and no test")
            for state, at in (("before", f"{commit}~"), ("after", commit)):
                install(tree, git(tree, "rev-parse", at).strip(), site, torch_files)
                git(tree, "checkout", "-q", commit, "--", "test")
                for path, names in tests.items():
                    results = outcomes(python, tree, driver(tree, path), names)
                    if not results:
                        problems.append(f"{subject}: {path}: no test ran {state}")
                    for case, outcome in sorted(results.items()):
                        control = f"{CONTROLS}::" in case
                        expected = "passed" if state == "after" or control else "failed"
                        if outcome != expected:
                            problems.append(f"{subject}: {state}: {case} {outcome}")
                    counts = {
                        o: list(results.values()).count(o) for o in ("passed", "failed")
                    }
                    runs.append({"commit": number, "subject": subject, "file": path,
                                 "driver": driver(tree, path), "tests": names,
                                 "state": state, **counts})  # fmt: skip
                    print(
                        f"  {state:6} {path}: {counts['passed']} passed, {counts['failed']} failed"
                    )
        (WORK / "results.json").write_text(json.dumps(
            {"torch": install_.full_version, "runs": runs, "problems": problems},
            indent=2) + "\n")  # fmt: skip
    for problem in problems:
        print(f"stack-check: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:]:
        raise SystemExit("usage: python -m tools.stack_check")
    sys.exit(main())
