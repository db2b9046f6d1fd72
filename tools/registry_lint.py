"""The graph-break registry check of PyTorch's GB_REGISTRY lint, for a series.

From 2.8 on every `unimplemented(gb_type=..., context=..., explanation=...,
hints=...)` call of torch/_dynamo (`unimplemented_v2` in 2.8 and 2.9) must
match the newest entry of its gb_type in
torch/_dynamo/graph_break_registry.json, and upstream's lint
(tools/linter/adapters/gb_registry_linter.py) fails a pull request where it
does not. This reads the calls the way that lint does (the arguments' text,
f-string fields as `{expr}`, hints split into their quoted strings with
`*graph_break_hints.NAME` expanded) and compares, on the pristine and on the
patched torch/_dynamo of this interpreter's torch:

- every gb_type in sync pristine must be in sync patched;
- every gb_type whose calls the series changes or adds must be in sync, in
  the registry once, and raised with one text everywhere.

    python -m tools.registry_lint     # with the venv's python

A release without a registry (before 2.8) has nothing to check.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from tools.plumbing import BUILD, write_tree

Call = tuple[Any, ...]  # (context, explanation, hints)
# The functions whose calls the lint reads; 2.10 renamed unimplemented_v2.
RAISERS = (
    "unimplemented",
    "unimplemented_with_warning",
    "unimplemented_v2",
    "unimplemented_v2_with_warning",
)


def _segment(lines: list[bytes], node: ast.expr) -> str:
    """ast.get_source_segment, without splitting the file again for each call."""
    assert node.end_lineno is not None and node.end_col_offset is not None
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first][node.col_offset : node.end_col_offset].decode()
    return b"".join(
        [lines[first][node.col_offset :], *lines[first + 1 : last]]
        + [lines[last][: node.end_col_offset]]
    ).decode()


def _text(lines: list[bytes], node: ast.expr) -> str:
    """An argument as the lint reads it."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(
            f"{{{ast.unparse(part.value)}}}"
            if isinstance(part, ast.FormattedValue)
            else _text(lines, part)
            for part in node.values
        )
    return _cleaned(_segment(lines, node))


def _cleaned(text: str) -> str:
    """Source text without its quotes, prefixes and line breaks."""
    text = re.sub(r'^f["\']', '"', text)
    text = re.sub(r'["\'] f["\']', " ", text)
    text = re.sub(r'^["\'](.*)["\']$', r"\1", text)
    text = " ".join(text.splitlines())
    text = text.encode().decode("unicode_escape")
    return re.sub(r'" "', " ", text)


def _hint_constants(dynamo: Path) -> dict[str, list[str]]:
    namespace: dict[str, Any] = {}
    exec((dynamo / "graph_break_hints.py").read_text(), namespace)
    return {
        name: value
        for name, value in namespace.items()
        if isinstance(value, list) and name.isupper() and not name.startswith("_")
    }


def _hints(text: str, constants: dict[str, list[str]]) -> list[str]:
    hints = re.findall(r'"([^"]*)"', text)
    if "*graph_break_hints." in text:
        for name, value in constants.items():
            if f"*graph_break_hints.{name}" in text:
                hints.extend(value)
                break
        else:
            hints.append(text)
    return hints


def calls(dynamo: Path) -> dict[str, set[Call]]:
    """{gb_type: the distinct (context, explanation, hints) it is raised with}."""
    constants = _hint_constants(dynamo)
    found: dict[str, set[Call]] = {}
    for path in sorted(dynamo.rglob("*.py")):
        source = path.read_bytes()
        lines = source.splitlines(keepends=True)
        for node in ast.walk(ast.parse(source)):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in RAISERS
            ):
                continue
            args = {kw.arg: _text(lines, kw.value) for kw in node.keywords}
            if args.get("gb_type") is None:
                continue
            hints = _hints(args.get("hints", ""), constants) if "hints" in args else []
            found.setdefault(args["gb_type"], set()).add(
                (args.get("context"), args.get("explanation"), tuple(sorted(hints)))
            )
    return found


def newest_entries(dynamo: Path) -> dict[str, list[dict[str, Any]]]:
    """{gb_type: the newest entry of each GB id that names it}."""
    registry = json.loads((dynamo / "graph_break_registry.json").read_text())
    entries: dict[str, list[dict[str, Any]]] = {}
    for history in registry.values():
        entries.setdefault(history[0]["Gb_type"], []).append(history[0])
    return entries


def in_sync(
    gb_type: str, raised: set[Call], entries: dict[str, list[dict[str, Any]]]
) -> bool:
    if len(raised) != 1 or len(entries.get(gb_type, ())) != 1:
        return False
    entry = entries[gb_type][0]
    (context, explanation, hints) = next(iter(raised))
    return (context, explanation, hints) == (
        entry["Context"],
        entry["Explanation"],
        tuple(sorted(entry["Hints"] or [])),
    )


def state(dynamo: Path) -> tuple[dict[str, set[Call]], dict[str, bool]]:
    raised, entries = calls(dynamo), newest_entries(dynamo)
    return raised, {g: in_sync(g, r, entries) for g, r in raised.items()}


def main() -> int:
    import torch._dynamo

    dynamo = Path(torch._dynamo.__file__).parent
    if not (dynamo / "graph_break_registry.json").is_file():
        print(f"registry lint: torch {torch.__version__} has no registry; skipped")
        return 0
    found = {}
    for name in ("pristine", "patched"):
        tree = BUILD / "registry-lint" / name
        shutil.rmtree(tree, ignore_errors=True)
        write_tree(tree, name, ["torch/_dynamo/**/*.py", "torch/_dynamo/*.json"])
        found[name] = state(tree / "torch" / "_dynamo")
    (pristine_calls, pristine), (patched_calls, patched) = found.values()
    changed = sorted(
        g for g in patched_calls if patched_calls[g] != pristine_calls.get(g)
    )
    problems = [
        f"{g!r}: in sync pristine, not patched"
        for g, ok in pristine.items()
        if ok and not patched.get(g, True)
    ] + [
        f"{g!r}: changed by the series, not in sync" for g in changed if not patched[g]
    ]
    print(
        f"registry lint, torch {torch.__version__}: {sum(pristine.values())} of "
        f"{len(pristine)} gb_types in sync pristine, {sum(patched.values())} of "
        f"{len(patched)} patched; changed by the series: "
        + (", ".join(repr(g) for g in changed) or "none")
    )
    for problem in problems:
        print(f"registry lint: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
