"""Upstream's lint on what a series changes, pristine against patched: ruff,
flake8 and the GB_REGISTRY check (docs/upstream.md). Run with a release's python."""

from __future__ import annotations

import ast
import json
import re
import runpy
import shutil
import subprocess
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path

from tools.plumbing import BUILD, ROOT, installed_series, write_tree
from tools.series_tests import exported

TOOLS = f"{ROOT}/.venvs/lint/bin/"
CONFIG = f"{ROOT}/tools/ruff-upstream.toml"
# flake8 for the codes upstream's ruff settings leave to it, and B950 at 120.
FLAKE8 = [
    "--select=B901,B909,E115,E201,E221,E225,E226,E227,E231,E241,E261,E262,E265,"
    "E266,E272,E306,B950",
    "--max-line-length=120",
]
FINDING = re.compile(r"^([^:\s]+):\d+:\d+: ([A-Z]+\d+ .*)$", re.MULTILINE)
Call = tuple[object, ...]  # a graph break's (context, explanation, sorted hints)
# The functions whose calls the registry check reads; 2.10 renamed the _v2.
RAISERS = {"unimplemented", "unimplemented_v2"}
RAISERS |= {f"{name}_with_warning" for name in RAISERS}
HINTS = "*graph_break_hints."  # a hints list of graph_break_hints.py, in a call


def target_version() -> list[str]:
    """ruff's --target-version if the release's oldest Python is before py310."""
    floor = re.search(r">=\s*3\.(\d+)", metadata.metadata("torch")["Requires-Python"])
    minor = int(floor[1]) if floor else 10
    return ["--target-version", f"py3{minor}"] if minor < 10 else []


def findings(tree: Path, paths: list[str]) -> Counter[str]:
    """{finding: how many times} in the files of paths that tree has."""
    present = [p for p in paths if (tree / p).is_file()]
    ruff = ["--config", CONFIG, *target_version(), "--no-cache"]
    found: Counter[str] = Counter()
    for command in (
        [TOOLS + "ruff", "check", *ruff, "--output-format=concise", *present],
        [TOOLS + "flake8", *FLAKE8, *present],
    ):
        proc = subprocess.run(command, cwd=tree, capture_output=True, text=True)
        found.update(map(": ".join, FINDING.findall(proc.stdout)))
    for path in present:
        command = [TOOLS + "ruff", "format", *ruff, "--check", path]
        if subprocess.run(command, cwd=tree, capture_output=True).returncode:
            found[f"{path}: not formatted as upstream's ruff format would"] += 1
    return found


def _text(lines: list[bytes], node: ast.expr) -> str:
    """An argument as the GB_REGISTRY lint reads it: f-string fields as
    `{expr}`, other expressions as their source without quotes and breaks."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.FormattedValue):
        return f"{{{ast.unparse(node.value)}}}"
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(lines, part) for part in node.values)
    # ast.get_source_segment, without splitting the file again for each call
    assert node.end_lineno is not None and node.end_col_offset is not None
    chunk = b"".join(lines[node.lineno - 1 : node.end_lineno])
    end = len(chunk) - len(lines[node.end_lineno - 1]) + node.end_col_offset
    text = re.sub(r'^f["\']', '"', chunk[node.col_offset : end].decode())
    text = re.sub(r'["\'] f["\']', " ", text)
    text = re.sub(r'^["\'](.*)["\']$', r"\1", text)
    text = " ".join(text.splitlines()).encode().decode("unicode_escape")
    return re.sub(r'" "', " ", text)


def registry(dynamo: Path) -> tuple[dict[str, set[Call]], dict[str, bool]]:
    """{gb_type: the distinct (context, explanation, hints) it is raised with},
    and {gb_type: whether that is one text, its one newest registry entry's}."""
    namespace = runpy.run_path(str(dynamo / "graph_break_hints.py"))
    lists = {n: v for n, v in namespace.items() if n.isupper() and isinstance(v, list)}
    found: dict[str, set[Call]] = {}
    for path in sorted(dynamo.rglob("*.py")):
        lines = path.read_bytes().splitlines(keepends=True)
        for node in ast.walk(ast.parse(b"".join(lines))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in RAISERS:
                args = {kw.arg: _text(lines, kw.value) for kw in node.keywords}
                text = args.get("hints", "")
                hints = re.findall(r'"([^"]*)"', text)
                named = [v for n, v in lists.items() if HINTS + n in text]
                if HINTS in text:
                    hints += named[0] if named else [text]
                hints.sort()
                if "gb_type" in args:
                    call = (args.get("context"), args.get("explanation"), tuple(hints))
                    found.setdefault(args["gb_type"], set()).add(call)
    entries = json.loads((dynamo / "graph_break_registry.json").read_text()).values()
    newest: dict[str, list[Call]] = {}
    for e in (history[0] for history in entries):
        call = (e["Context"], e["Explanation"], tuple(sorted(e["Hints"] or [])))
        newest.setdefault(e["Gb_type"], []).append(call)
    synced = {g: len(r) == 1 and newest.get(g) == list(r) for g, r in found.items()}
    return found, synced


def registry_check(work: Path, version: str) -> bool:
    """Prints the GB_REGISTRY check of work/pristine and work/patched; whether
    a gb_type in sync pristine, or whose calls the series changes, is patched."""
    pristine, patched = work / "pristine/torch/_dynamo", work / "patched/torch/_dynamo"
    if not (pristine / "graph_break_registry.json").is_file():  # before 2.8
        print(f"registry lint: torch {version} has no registry; skipped")
        return True
    (before_calls, before), (after_calls, after) = registry(pristine), registry(patched)
    changed = sorted(g for g in after_calls if after_calls[g] != before_calls.get(g))
    print(
        f"registry lint, torch {version}: {sum(before.values())} of {len(before)} "
        f"gb_types in sync pristine, {sum(after.values())} of {len(after)} patched; "
        "changed by the series: " + (", ".join(map(repr, changed)) or "none")
    )
    problems = [g for g in after if not after[g] and (before.get(g) or g in changed)]
    for g in problems:
        print(f"registry lint: {g!r}: not in sync patched", file=sys.stderr)
    return not problems


def main() -> int:
    install, series = installed_series()
    work = BUILD / "upstream-lint" / install.version
    shutil.rmtree(work, ignore_errors=True)
    dynamo = ["torch/_dynamo/**/*.py", "torch/_dynamo/*.json"]  # for registry_check
    write_tree(work / "pristine", "pristine", dynamo)
    paths = write_tree(work / "patched", "patched", dynamo)
    for test in exported(series):
        target = work / "patched" / test.upstream
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / test.path, target)
        paths.append(test.upstream)
    new = findings(work / "patched", paths) - findings(work / "pristine", paths)
    problems = [p + (f" (x{n})" if n > 1 else "") for p, n in sorted(new.items())]
    print(
        f"upstream lint, torch {install.version} series: {len(paths)} files "
        f"({', '.join(paths)}): {len(problems)} new findings"
    )
    for problem in problems:
        print(f"upstream lint: {problem}", file=sys.stderr)
    ok = registry_check(work, install.version)
    record = dict(
        torch=install.version, files=paths, new_findings=problems, registry_in_sync=ok
    )
    (work / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    return 1 if problems or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
