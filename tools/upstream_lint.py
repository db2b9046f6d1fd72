"""Upstream's lint on what a series changes: no new finding in its files.

For the torch of this interpreter and its series, writes each file the series
touches under torch/ as the wheel has it and as the series leaves it, plus
the test files the series adds upstream, and runs on both trees:

- ruff check with the settings of PyTorch's pyproject.toml
  (tools/ruff-upstream.toml), and ruff format --check with them;
- flake8 with the rules upstream leaves to it (the codes its pyproject.toml
  marks external, and B950 at its 120 columns);
- the graph-break registry check of its GB_REGISTRY lint
  (tools/registry_lint.py), from 2.8 on.

A finding counts as new when the patched file has more of it (same code and
message, wherever the line) than the wheel's file: the wheel's own findings,
from a newer ruff than the release was linted with, are not the patch's to
fix. A file the series adds must have none. mypy, which checks all of torch's
sources, is tools/typecheck.py (`make typecheck`), not run in CI.

    python -m tools.upstream_lint       # with a release venv's python
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path

from tools import registry_lint
from tools.plumbing import BUILD, ROOT, installed_series, write_tree
from tools.series_tests import exported

WORK = BUILD / "upstream-lint"  # a folder per release
TOOLS = ROOT / ".venvs" / "lint" / "bin"
RUFF_CONFIG = Path(__file__).resolve().parent / "ruff-upstream.toml"
FLAKE8_ONLY = (
    "B901,B909,E115,E201,E221,E225,E226,E227,E231,E241,E261,E262,E265,E266,"
    "E272,E306,B950"
)
# path:line:col: CODE message
_FINDING = re.compile(r"^(?P<path>[^:\s]+):\d+:\d+: (?P<code>[A-Z]+\d+) (?P<text>.*)$")


def write_trees(work: Path) -> list[str]:
    """work/pristine and work/patched; the paths linted, relative to both."""
    shutil.rmtree(work, ignore_errors=True)
    write_tree(work / "pristine", "pristine")
    touched = write_tree(work / "patched", "patched")
    tests = exported(installed_series()[1])
    for test in tests:
        target = work / "patched" / test.upstream
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / test.path, target)
    return touched + [t.upstream for t in tests]


Finding = tuple[str, str, str]  # (path, code, text)


def target_version() -> list[str]:
    """ruff's --target-version for a torch whose oldest Python (its
    Requires-Python) is older than upstream's py310: 2.4 supports 3.8, 2.5
    to 2.8 3.9, so their lint must not ask for `X | None`."""
    floor = re.search(r">=\s*3\.(\d+)", metadata.metadata("torch")["Requires-Python"])
    minor = int(floor[1]) if floor else 10
    return ["--target-version", f"py3{minor}"] if minor < 10 else []


def findings(tree: Path, paths: list[str]) -> Counter[Finding]:
    present = [p for p in paths if (tree / p).is_file()]
    if not present:
        return Counter()
    commands: list[list[str | Path]] = [
        [TOOLS / "ruff", "check", "--config", RUFF_CONFIG, *target_version(),
         "--no-cache", "--output-format=concise", *present],
        [TOOLS / "flake8", f"--select={FLAKE8_ONLY}", "--max-line-length=120",
         *present],
    ]  # fmt: skip
    found: Counter[Finding] = Counter()
    for command in commands:
        proc = subprocess.run(command, cwd=tree, capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            match = _FINDING.match(line.strip())
            if match:
                found[(match["path"], match["code"], match["text"])] += 1
    return found


def unformatted(tree: Path, paths: list[str]) -> set[str]:
    bad = set()
    for path in paths:
        if (tree / path).is_file():
            proc = subprocess.run(
                [TOOLS / "ruff", "format", "--config", RUFF_CONFIG,
                 *target_version(), "--check", "--no-cache", path],
                cwd=tree, capture_output=True, text=True,
            )  # fmt: skip
            if proc.returncode != 0:
                bad.add(path)
    return bad


def main() -> int:
    install, _ = installed_series()
    work = WORK / install.version
    paths = write_trees(work)
    pristine, patched = work / "pristine", work / "patched"
    new = findings(patched, paths) - findings(pristine, paths)
    problems = [
        f"{path}: {code} {text}" + (f" (x{n})" if n > 1 else "")
        for (path, code, text), n in sorted(new.items())
    ]
    problems += [
        f"{path}: not formatted as ruff format with upstream's settings would"
        for path in sorted(unformatted(patched, paths) - unformatted(pristine, paths))
    ]
    print(
        f"upstream lint, torch {install.version} series: {len(paths)} files "
        f"({', '.join(paths)}): {len(problems)} new findings"
    )
    for problem in problems:
        print(f"upstream lint: {problem}", file=sys.stderr)
    registry_in_sync = registry_lint.main() == 0
    (work / "results.json").write_text(
        json.dumps(
            {
                "torch": install.version,
                "files": paths,
                "new_findings": problems,
                "registry_in_sync": registry_in_sync,
            },
            indent=1,
        )
        + "\n"
    )
    return 1 if problems or not registry_in_sync else 0


if __name__ == "__main__":
    sys.exit(main())
