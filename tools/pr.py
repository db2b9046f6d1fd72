"""Write the pull request (docs/upstream.md): for each commit of the newest
series (one PR each, as ghstack sends them), build/pr/NN-<name>.patch, its
author whoever runs `make pr`, and NN-<name>.md, its title and body with a
test plan from the results `make pr` has just written (a missing one stops it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.demo import errors as form_errors
from tools.plumbing import BUILD, ROOT, installed_series, venv_states
from tools.series_tests import TestFile, exported
from tools.upstream_test import RAN

OUT = BUILD / "pr"
# What each PR relates to upstream, by its subject (docs/upstream.md: as read).
RELATED = {
    "[dynamo] Graph break instead of crashing on an aliased HOP intermediate": (
        "Related: #180929 (closed), which added the taint whose RuntimeError "
        "this turns into a graph break; its author's review is wanted."
    ),
    "[dynamo] Name the change and the module in the nn.Module mutation graph break": (
        "Related: #126355 (closed), whose test is test_map_side_effects; "
        "#170369 asks to name the HOP in a side-effect break (its thread as "
        "stored here: open, with a last comment of 2026-05-23 that could not "
        "reproduce it on main; whether it is still open was not confirmed); "
        "#196199 (open): changing an outer module's attribute in a `wrap` "
        "body is not supported. The HOPs that allow side effects keep "
        "allowing these changes (#168395 asks for side effects in selected "
        "HOPs)."
    ),
}


def result(folder: str, target: str) -> dict[str, Any]:
    """build/<folder>/results.json, which target writes."""
    path = BUILD / folder / "results.json"
    if not path.is_file():
        raise SystemExit(f"pr: {path.relative_to(ROOT)} is missing: run `{target}`")
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def run_test_file(python: Path, test: TestFile) -> tuple[int, int, int]:
    """`python <test file>`, as PyTorch's CI runs it: exit code, tests, failed."""
    path = ROOT / test.path
    proc = subprocess.run(
        [python, path.name], cwd=path.parent, capture_output=True, text=True
    )
    ran = RAN.search(proc.stderr)
    if ran is None:
        raise SystemExit(f"pr: {path} did not run:\n{proc.stderr[-3000:]}")
    failed = re.findall(r"(?:failures|errors)=(\d+)", proc.stderr[ran.end() :])
    return proc.returncode, int(ran.group(1)), sum(map(int, failed))


def whole_stack(version: str) -> str:
    """PyTorch's own tests, upstream's lint and mypy, as `make pr` ran them."""
    found = result(
        f"upstream-test/torch-{version}", f"make upstream-test TORCH={version}"
    )
    lines = [
        f"- `{seed['command']}` (the stack's test files), torch {version} "
        f"{'with' if seed['state'] == 'patched' else 'without'} the stack: "
        f"{'passed' if seed['passed'] else 'failed'}"
        f" ({seed['ran']} test{'s' if seed['ran'] != 1 else ''})"
        for seed in found["seeds"]
        if seed["mode"] is None
    ]
    for entry in found["files"]:
        gained = entry["passing_patched_only"]
        lines.append(
            f"- `pytest {entry['file']}` (through its driver, whole): before "
            f"{entry['counts']['pristine'].get('passed', 0)} passed, after "
            f"{entry['counts']['patched'].get('passed', 0)} passed; "
            f"{len(entry['regressions'])} passing before and not after"
            + (f"; passing after only: {', '.join(gained)}" if gained else "")
        )
    lint = result(f"upstream-lint/{version}", "python -m tools.upstream_lint")
    # This checkout's run only: a committed result may predate the series.
    mypy = result(f"typecheck/{version}", f"make typecheck TORCH={version}")
    return "\n".join(
        [
            *lines,
            "  (before: the unchanged test tree on torch without the stack; after: "
            "the tree with the stack's test changes on torch with it. These are "
            f"main's tests on the v{version} release: the tests that fail, fail "
            "in both states; they were compared, not investigated one by one.)",
            "- ruff and flake8 with upstream's settings, and the GB_REGISTRY check, on "
            f"the {len(lint['files'])} changed files: {len(lint['new_findings'])} new "
            f"findings; registry {'in sync' if lint['registry_in_sync'] else 'NOT in sync'}",
            "- `make typecheck` (mypy 1.16.0, upstream's mypy.ini settings, following "
            f"imports through torch): {len(mypy['new'])} new errors "
            f"({mypy['errors']['pristine']} before, {mypy['errors']['patched']} after, "
            "in the release's own sources)",
        ]
    )


def own_tests(number: int, version: str) -> list[str]:
    """The PR's own tests before and after it, from make stack-check."""
    found = result("stack-check", "make stack-check")
    runs = [r for r in found["runs"] if r["commit"] == number]
    if not runs:
        raise SystemExit(f"pr: PR {number} is not in the last `make stack-check`")
    lines = []
    for path in dict.fromkeys(r["file"] for r in runs):
        by_state = {r["state"]: r for r in runs if r["file"] == path}
        after = by_state["after"]
        selection = f" -k '{' or '.join(after['tests'])}'" if after["tests"] else ""
        shim = (
            ""
            if after["driver"].endswith("test_hop_mutation.py")
            else " (main's test file; a pytest plugin defines main's "
            "`TestCaseWithNestedGraphBreaks` for the release)"
        )
        before = by_state["before"]
        lines.append(
            f"- `pytest {after['driver']}{selection}`{shim}, torch {version}: "
            f"before this PR {before['passed']} passed, {before['failed']} failed; "
            f"with this PR {after['passed']} passed, {after['failed']} failed"
        )
    if found["problems"]:
        lines.append(f"- `make stack-check` found: {'; '.join(found['problems'])}")
    return lines


def issue_table(version: str, test: TestFile) -> list[str]:
    """The runs of the test file the stack adds, and the table of the issue's
    forms' errors, without and with the stack."""
    errors, runs = {}, {}
    with venv_states(BUILD / "pr-states") as pythons:
        for state, python in pythons.items():
            errors[state] = form_errors(python, "1")
            runs[state] = run_test_file(python, test)
    _, tests, failed = runs["pristine"]
    exit_code, after, after_failed = runs["patched"]
    rows = [
        "| change in a `control_flow.map` body | without the stack | with it |",
        "|---|---|---|",
    ]
    for form in errors["pristine"]:
        code, _, note = form.partition(" (")
        cells = [f"`{code}`" + (f" ({note}" if note else "")]
        for state in ("pristine", "patched"):
            e = errors[state][form]
            text = f"`{e['type']}`: {e['message']}" if e["message"] else e["type"]
            cells.append(text.replace("|", "\\|"))
        rows.append(f"| {' | '.join(cells)} |")
    return [
        f"- `python {test.upstream}` (as PyTorch's CI runs it), torch {version}: "
        f"with the stack {after - after_failed} of {after} passed (exit code "
        f"{exit_code}); without it {failed} failed (the error tests) and "
        f"{tests - failed} passed (the controls)",
        "\nThe issue's reproducer and other ways to write the same change, "
        f"compiled with `fullgraph=True` on torch {metadata.version('torch')} "
        "without and with the stack:\n\n" + "\n".join(rows),
    ]


def main() -> int:
    install, found = installed_series()
    version = install.version
    name, email = (
        subprocess.run(
            ["git", "config", key], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        for key in ("user.name", "user.email")
    )
    if not (name and email):
        raise SystemExit("pr: set git's user.name and user.email: the PRs' author")
    identity = f"{name} <{email}>"
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    (test,) = [t for t in exported(found) if t.runs]
    last = max(n for n, p in enumerate(found.patches, 1) if test.upstream in p.files)
    for number, patch in enumerate(found.patches, 1):
        name = f"{number:02d}-{patch.path.name.split('-', 1)[1].removesuffix('.patch')}"
        text = patch.read().decode()
        (OUT / f"{name}.patch").write_text(
            re.sub(
                r"^From: .*(?:\n .*)*$", f"From: {identity}", text, count=1, flags=re.M
            )
        )
        head = text.split("\n---\n", 1)[0]
        why = head.split("\n\n", 1)[1].strip() if "\n\n" in head else ""
        related = f"\n{RELATED[patch.subject]}\n" if patch.subject in RELATED else ""
        stack = [
            f"* {'__->__ ' if n == number else ''}{p.subject}"
            for n, p in reversed(list(enumerate(found.patches, 1)))
        ]
        plan = own_tests(number, version) + (
            issue_table(version, test) if number == last else []
        )
        (OUT / f"{name}.md").write_text(f"""\
# {patch.subject}

Author: {identity}

Stack (oldest at the bottom):
{chr(10).join(stack)}

{why}
{related}
Base: v{version}. PyTorch main cannot be checked out where this was made:
the Dynamo hunks are made on the v{version} sources, the test hunks on the
stored texts of main's test files that the series' UPSTREAM file names
(main's current text of test/higher_order_ops/test_invoke_subgraph.py
could not be established), so a rebase onto main may be needed.

## Test plan

{chr(10).join(plan)}

With the whole stack:
{whole_stack(version)}
""")
        print(f"wrote {OUT / name}.patch and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
