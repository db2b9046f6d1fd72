"""Write the pull request: a stack of PRs, one per commit of the newest series.

Run with the python of the newest release's venv (`make pr`), whose series
is the pull request: one commit a PR, as ghstack sends them, each with its
own tests. It writes, under build/pr/:

- NN-<name>.patch: each commit, as `git format-patch` wrote it, its author
  the git identity (user.name, user.email) of whoever runs `make pr`;
  `git am` of them in order on the v<release> sources plus main's test/
  gives the stack (make stack-check checks it);
- NN-<name>.md: the PR's title and body: the commit message (what and why),
  the stack, the base, and a test plan of commands this project ran, each
  with its result: the PR's own tests before and after it
  (build/stack-check/results.json, from `make stack-check`); for the last PR
  that changes test/dynamo/test_hop_mutation.py, a run of it as PyTorch's
  CI runs it and a before/after table of the issue's reproducer
  (tools/demo.py), each without and with the whole stack;
  with the whole stack, PyTorch's own test files (the last `make
  upstream-test` of this release) and upstream's lint and mypy. `make pr`
  runs those checks first, so the results are of the series being written;
  a result that is missing stops it, naming the target that makes it.
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
from torchpatch import series

OUT = BUILD / "pr"
STACK = BUILD / "stack-check" / "results.json"


def result(path: Path, target: str) -> dict[str, Any]:
    """A check's results, which `make pr` has just written."""
    if not path.is_file():
        raise SystemExit(f"pr: {path.relative_to(ROOT)} is missing: run `{target}`")
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def run_test_file(python: Path, path: Path, upstream: str) -> dict[str, Any]:
    """`python <test file>` (upstream where the PR adds it), as PyTorch's CI
    runs it: counts and seconds."""
    proc = subprocess.run(
        [python, path.name], cwd=path.parent,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    ran = re.search(r"^Ran (\d+) tests? in ([\d.]+)s$", proc.stderr, re.MULTILINE)
    if ran is None:
        raise SystemExit(f"pr: {path} did not run:\n{proc.stderr[-3000:]}")
    tests = int(ran.group(1))
    failed = sum(
        int(n)
        for n in re.findall(r"(?:failures|errors)=(\d+)", proc.stderr[ran.end() :])
    )
    return {
        "command": f"python {upstream}",
        "exit_code": proc.returncode,
        "tests": tests,
        "failed": failed,
        "passed": tests - failed,
        "seconds": round(float(ran.group(2))),
    }


def upstream_plan(version: str) -> str:
    """PyTorch's own tests as the last `make upstream-test` ran them."""
    found = result(
        BUILD / "upstream-test" / f"torch-{version}" / "results.json",
        f"make upstream-test TORCH={version}",
    )
    lines = []
    for seed in found["seeds"]:
        if seed["mode"] is None:
            torch_state = "with" if seed["state"] == "patched" else "without"
            lines.append(
                f"- `{seed['command']}` (the stack's test files), torch {version} "
                f"{torch_state} the stack: "
                + ("passed" if seed["passed"] else "failed")
                + f" ({seed['ran']} test{'s' if seed['ran'] != 1 else ''})"
            )
    for entry in found["files"]:
        pristine, patched = entry["counts"]["pristine"], entry["counts"]["patched"]
        gained = entry["passing_patched_only"]
        lines.append(
            f"- `pytest {entry['file']}` (through its driver, whole): before "
            f"{pristine.get('passed', 0)} passed, after {patched.get('passed', 0)}"
            f" passed; {len(entry['regressions'])} passing before and not after"
            + (f"; passing after only: {', '.join(gained)}" if gained else "")
        )
    lines.append(
        "  (before: the unchanged test tree on torch without the stack; after: "
        "the tree with the stack's test changes on torch with it. These are "
        f"main's tests on the v{version} release: the tests that fail, fail "
        "in both states; they were compared, not investigated one by one.)"
    )
    return "\n".join(lines)


def checks_plan(version: str) -> str:
    """Upstream's lint and mypy on the changed files, as this project last ran
    them (tools/upstream_lint.py in make test, make typecheck)."""
    lint = result(
        BUILD / "upstream-lint" / version / "results.json",
        "python -m tools.upstream_lint",
    )
    # This checkout's run only: a committed result may predate the series.
    mypy = result(
        BUILD / "typecheck" / version / "results.json",
        f"make typecheck TORCH={version}",
    )
    sync = "in sync" if lint["registry_in_sync"] else "NOT in sync"
    return (
        f"- ruff and flake8 with upstream's settings, and the GB_REGISTRY "
        f"check, on the {len(lint['files'])} changed files: "
        f"{len(lint['new_findings'])} new findings; registry {sync}\n"
        f"- `make typecheck` (mypy 1.16.0, upstream's mypy.ini settings, "
        f"following imports through torch): {len(mypy['new'])} new errors "
        f"({mypy['errors']['pristine']} before, {mypy['errors']['patched']} "
        "after, in the release's own sources)"
    )


def cell(error: dict[str, Any]) -> str:
    text = (
        f"`{error['type']}`: {error['message']}" if error["message"] else error["type"]
    )
    return text.replace("|", "\\|")


def before_after(version: str, test: TestFile) -> tuple[str, dict[str, Any]]:
    """The table of errors without and with the stack, and the runs of the
    test file the stack adds."""
    errors, results = {}, {}
    with venv_states(BUILD / "pr-states") as pythons:
        for state, python in pythons.items():
            errors[state] = form_errors(python, "1")
            results[state] = run_test_file(python, ROOT / test.path, test.upstream)
    rows = [
        "| change in a `control_flow.map` body | without the stack | with it |",
        "|---|---|---|",
    ]
    for form in errors["pristine"]:
        code, _, note = form.partition(" (")
        label = f"`{code}`" + (f" ({note}" if note else "")
        rows.append(
            f"| {label} | {cell(errors['pristine'][form])} "
            f"| {cell(errors['patched'][form])} |"
        )
    return "\n".join(rows), {"test": test.upstream, **results}


def identity() -> str:
    """`Name <email>` of whoever runs make pr, from git's configuration."""
    values = []
    for key in ("user.name", "user.email"):
        proc = subprocess.run(
            ["git", "config", key], cwd=ROOT, capture_output=True, text=True
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise SystemExit(f"pr: set git's {key}: it is the PRs' author")
        values.append(proc.stdout.strip())
    return f"{values[0]} <{values[1]}>"


def message(patch: series.Patch) -> str:
    """The commit message's body: what and why."""
    text = patch.read().decode()
    head = text.split("\n---\n", 1)[0]
    return head.split("\n\n", 1)[1].strip() if "\n\n" in head else ""


def own_tests(number: int, version: str) -> list[str]:
    """The PR's own tests before and after it, from make stack-check."""
    found = result(STACK, "make stack-check")
    runs = [r for r in found["runs"] if r["commit"] == number]
    if not runs:
        raise SystemExit(f"pr: PR {number} is not in the last `make stack-check`")
    lines = []
    for path in dict.fromkeys(r["file"] for r in runs):
        by_state = {r["state"]: r for r in runs if r["file"] == path}
        first = by_state["after"]
        selection = f" -k '{' or '.join(first['tests'])}'" if first["tests"] else ""
        shim = (
            "" if first["driver"].endswith("test_hop_mutation.py")
            else " (main's test file; a pytest plugin defines main's "
            "`TestCaseWithNestedGraphBreaks` for the release)"
        )  # fmt: skip
        lines.append(
            f"- `pytest {first['driver']}{selection}`{shim}, torch {version}: "
            + "; ".join(
                f"{state} this PR {r['passed']} passed, {r['failed']} failed"
                for state, r in (
                    ("before", by_state.get("before")),
                    ("with", by_state.get("after")),
                )
                if r is not None
            )
        )
    if found["problems"]:
        lines.append(f"- `make stack-check` found: {'; '.join(found['problems'])}")
    return lines


# What each PR relates to upstream, by its subject, as the search tool's
# stored threads show them (read 2026-12-04): #126355 closed (PR 126444 made
# its test accept either message); #170369 stored as open, its last comment
# (2026-05-23) could not reproduce it and asks to reopen if seen; #196199
# open; #169742 closed, and v2.15.0 has its add_hop_context; #168395 asks
# for side effects in selected HOPs; #180929 closed after a merge command.
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


def stack_list(found: series.Series, number: int) -> str:
    return "\n".join(
        f"* {'__->__ ' if n == number else ''}{p.subject}"
        for n, p in reversed(list(enumerate(found.patches, 1)))
    )


def body(
    version: str,
    found: series.Series,
    number: int,
    added: tuple[str, dict[str, Any]] | None,
) -> str:
    patch = found.patches[number - 1]
    plan = own_tests(number, version)
    if added is not None:
        table, tests = added
        pristine, patched = tests["pristine"], tests["patched"]
        plan.append(
            f"- `{patched['command']}` (as PyTorch's CI runs it), torch {version}: "
            f"with the stack {patched['passed']} of {patched['tests']} passed "
            f"(exit code {patched['exit_code']}); without it {pristine['failed']} "
            f"failed (the error tests) and {pristine['passed']} passed (the controls)"
        )
        plan.append(
            "\nThe issue's reproducer and other ways to write the same change, "
            f"compiled with `fullgraph=True` on torch {metadata.version('torch')} "
            f"without and with the stack:\n\n{table}"
        )
    whole = "\n".join(x for x in (upstream_plan(version), checks_plan(version)) if x)
    related = f"\n{RELATED[patch.subject]}\n" if patch.subject in RELATED else ""
    return f"""\
Stack (oldest at the bottom):
{stack_list(found, number)}

{message(patch)}
{related}
Base: v{version}. PyTorch main cannot be checked out where this was made:
the Dynamo hunks are made on the v{version} sources, the test hunks on the
stored texts of main's test files that the series' UPSTREAM file names
(main's current text of test/higher_order_ops/test_invoke_subgraph.py
could not be established), so a rebase onto main may be needed.

## Test plan

{chr(10).join(plan)}

With the whole stack:
{whole}
"""


def slug(patch: series.Patch) -> str:
    return patch.path.name.split("-", 1)[1].removesuffix(".patch")


def main() -> int:
    install, found = installed_series()
    version = install.version
    author = identity()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    (test,) = [t for t in exported(found) if t.runs]
    last = max(n for n, p in enumerate(found.patches, 1) if test.upstream in p.files)
    for number, patch in enumerate(found.patches, 1):
        name = f"{number:02d}-{slug(patch)}"
        text = re.sub(
            r"^From: .*(?:\n .*)*$", f"From: {author}", patch.read().decode(),
            count=1, flags=re.MULTILINE,
        )  # fmt: skip
        (OUT / f"{name}.patch").write_text(text)
        added = before_after(version, test) if number == last else None
        (OUT / f"{name}.md").write_text(
            f"# {patch.subject}\n\nAuthor: {author}\n\n"
            + body(version, found, number, added)
        )
        print(f"wrote {OUT / name}.patch and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
