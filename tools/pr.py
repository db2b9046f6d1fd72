"""Write the pull request: the patch against main and its description.

Run with the python of the newest release's venv (`make pr`), whose series
is the pull request. It writes, under build/pr/:

- fix-126355.patch: `torchpatch export` of the series, one `git format-patch`
  mail with the fix, the changes to PyTorch's own tests and the new test
  file; checked here with `git apply` on a tree of this wheel's
  torch/_dynamo plus the new test file (PyTorch's other test files are not
  in the wheel; patches/torch-<version>/UPSTREAM says where their hunks
  were checked);
- PR.md: title and body in PyTorch's conventions, with a before/after
  table from a real run of tools/reproducer.py on the pristine and the
  patched torch, and a test plan of commands this project ran, each with
  its result: the new test file in both states (run here), and PyTorch's
  own tests from the last `make upstream-test` of this release
  (build/upstream-test/torch-<version>/results.json; said to be missing
  where it has not run).

It leaves the venv's torch patched.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.bench.instructions import FREE_CASES
from tools.demo import run_forms
from tools.paths import BENCH_RESULTS, BUILD, RESULTS
from tools.run import torchpatch
from torchpatch import bundle, series
from torchpatch.targets import InstalledTorch

OUT = BUILD / "pr"
ISSUE = 126355


def check_applies(patch: Path, found: series.Series, torch_root: Path) -> None:
    """git apply on the wheel's sources must give what torchpatch installs."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        torchpatch("revert")
        for path in found.files:
            if path.startswith("torch/"):
                (tree / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(torch_root / path, tree / path)
        torchpatch("apply")
        includes = ["--include=torch/*"] + [
            f"--include={t.upstream}" for t in found.exported_tests
        ]
        subprocess.run(["git", "apply", *includes, str(patch)], cwd=tree, check=True)
        for path in found.files:
            if path.startswith("torch/") and (
                (tree / path).read_bytes() != (torch_root / path).read_bytes()
            ):
                raise SystemExit(f"pr: git apply and torchpatch differ on {path}")


def run_test_file(path: Path, upstream: str) -> dict[str, Any]:
    """`python <test file>` (upstream where the PR adds it), as PyTorch's CI
    runs it: counts and seconds."""
    proc = subprocess.run(
        [sys.executable, path.name], cwd=path.parent,
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


def cost(version: str) -> str:
    """The series' cost from `make bench` (results/bench/latest.json), or
    else from the smoke run of `make test` on this release."""
    rows, source = [], "make bench"
    for name in ("latest.json", f"smoke-{version}.json"):
        results = BENCH_RESULTS / name
        rows = [
            r
            for r in json.loads(results.read_text())["rows"]
            if r["series"] == version and r["case"] in FREE_CASES
        ] if results.is_file() else []  # fmt: skip
        if rows:
            break
        source = "the smoke run of make test, small n"
    if not rows:
        return "not measured for this release (`make bench TORCH=<release>`)."
    lines = [
        "| workload | n | instructions, patched/pristine | A/A spread | calls added |",
        "|---|---|---|---|---|",
        *(
            f"| {r['case']} | {r['n'] or ''} | {r['ratio']:.5f} "
            f"| {r['aa_spread']:.5f} | {r['calls_added']:+d} |"
            for r in rows
        ),
    ]
    return (
        f"from {source}: callgrind instruction counts of one trace (median of "
        f"{len(rows[0]['layouts'])} heap layouts; the A/A spread is what layout "
        f"alone moves) and Python calls added (cProfile), torch {version}:\n\n"
        + "\n".join(lines)
    )


def upstream_plan(version: str) -> str:
    """PyTorch's own tests as the last `make upstream-test` ran them."""
    results = BUILD / "upstream-test" / f"torch-{version}" / "results.json"
    if not results.is_file():
        return (
            "- PyTorch's own test files: not run for this release here "
            "(`make upstream-test TORCH=<release>`)."
        )
    found = json.loads(results.read_text())
    lines = []
    for seed in found["seeds"]:
        if seed["mode"] is None:
            torch_state = "with" if seed["state"] == "patched" else "without"
            lines.append(
                f"- `{seed['command']}` (this PR's test files), torch {version} "
                f"{torch_state} this PR's fix: "
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
        "  (before: the unchanged test tree on torch without this PR; after: "
        "the tree with this PR's test changes on torch with it. These are "
        f"main's tests on the v{version} release: the tests that fail, fail "
        "in both states; they were compared, not investigated one by one.)"
    )
    return "\n".join(lines)


def _last_result(*candidates: Path) -> dict[str, Any] | None:
    """The first of candidates that a run wrote, read."""
    for path in candidates:
        if path.is_file():
            result: dict[str, Any] = json.loads(path.read_text())
            return result
    return None


def checks_plan(version: str) -> str:
    """Upstream's lint and mypy on the changed files, as this project last ran
    them (tools/upstream_lint.py in make test, make typecheck)."""
    lines = []
    lint = _last_result(BUILD / "upstream-lint" / version / "results.json")
    if lint is not None:
        sync = "in sync" if lint["registry_in_sync"] else "NOT in sync"
        lines.append(
            f"- ruff and flake8 with upstream's settings, and the GB_REGISTRY "
            f"check, on the {len(lint['files'])} changed files: "
            f"{len(lint['new_findings'])} new findings; registry {sync}"
        )
    mypy = _last_result(
        BUILD / "typecheck" / version / "results.json",
        RESULTS / f"typecheck-{version}.json",
    )
    if mypy is not None:
        lines.append(
            f"- `make typecheck` (mypy 1.16.0, upstream's mypy.ini settings, "
            f"following imports through torch): {len(mypy['new'])} new errors "
            f"({mypy['errors']['pristine']} before, {mypy['errors']['patched']} "
            "after, in the release's own sources)"
        )
    return "\n".join(lines)


def cell(error: dict[str, Any]) -> str:
    text = (
        f"`{error['type']}`: {error['message']}" if error["message"] else error["type"]
    )
    return text.replace("|", "\\|")


def before_after(version: str) -> tuple[str, dict[str, Any]]:
    """The table of errors, pristine and patched, and the test file's results."""
    found = series.load_series(bundle.data_root() / "patches", version)
    (test,) = [t for t in found.exported_tests if t.runs]
    errors, results = {}, {}
    for state, command in (("pristine", "revert"), ("patched", "apply")):
        torchpatch(command)
        errors[state] = run_forms("1")
        results[state] = run_test_file(bundle.data_root() / test.path, test.exported_as)
    rows = [
        "| mutation in a `control_flow.map` body | before | after |",
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


def body(version: str, table: str, tests: dict[str, Any], found: series.Series) -> str:
    torch_version = metadata.version("torch")
    pristine, patched = tests["pristine"], tests["patched"]
    subjects = "\n".join(f"- {p.subject}" for p in found.patches)
    return f"""\
Fixes #{ISSUE}

Based on v{version}: PyTorch main could not be checked out where this was
made, so the Dynamo hunks are against the v{version} sources and may need a
rebase onto main. The test hunks were made on the stored texts of main's
test files that `patches/torch-{version}/UPSTREAM` names (one without a
recorded commit).

Setting or deleting an attribute of an `nn.Module` from inside the body of a
HigherOrderOp (`control_flow.map`, `torch.cond`, `while_loop`, `wrap`,
activation checkpointing) is refused by Dynamo, but the graph break depended on
how the mutation was written: "HOP: Unsafe side effect" naming
`UnspecializedNNModuleVariable(...)`, "HOP: Non-nullified side effect", the
repr of an internal `AttributeError` for a new attribute, or "nn.Module
mutation in HigherOrderOp" without the attribute for a module Dynamo does not
inline. `self.w += 1` in an `autograd.Function` forward or a
`nested_compile_region` body was an internal error that `fullgraph=False` did
not fall back from.

This PR adds `SideEffects.unsupported_module_mutation()`, raised wherever a
change to an outer module's state is refused (attribute set and delete, and
writes to the module's `__dict__`, `_parameters`, `_buffers` and `_modules`
that its registering methods and container modules make), for both module
variable kinds: the existing gb_type "nn.Module mutation in HigherOrderOp",
with an explanation that says what the body did and names the module class
(Dynamo already appends the HigherOrderOp's name). The aliased intermediate of `self.w += 1` in an
`autograd.Function` forward or a `nested_compile_region` body, which those
HigherOrderOps filter out of their outputs, becomes a graph break.

Commits:
{subjects}

Related: #170369 asks that this graph break name the HigherOrderOp; #196199
(open) reports this refusal for an outer module attribute in a `wrap` body.
The refusal itself is kept: HigherOrderOps that opt in to side effects keep
allowing these mutations (an `autograd.Function` forward, `invoke_subgraph`,
checkpoint with `skip_fwd_side_effects_in_bwd_under_checkpoint`), in line
with #168395 and #185738, which make side-effect and mutation support an
opt-in per HigherOrderOp. The second commit is about the aliased
intermediates that `invoke_subgraph` and, since #180921, an
`autograd.Function` forward filter out of their subgraph's outputs: using
one outside the subgraph becomes a graph break instead of an internal error.
#180670 (closed) pruned aliased side-effect outputs of an `autograd.Function`
forward, the same neighbourhood.

## What changes for users

Nothing that compiles today changes: mutation at the root, of modules created
inside the body, under `torch.func` transforms, in an `autograd.Function`
forward or a `nested_compile_region` body, under checkpoint with
`skip_fwd_side_effects_in_bwd_under_checkpoint`, and the `fullgraph=False`
fallback keep matching eager. Only the error of code that is already refused
changes, with `fullgraph=True`:

{table}

(From a real run of the issue's reproducer and other ways of writing it on
torch {torch_version}, before and after this patch. `map`, `cond` and
`while_loop` wrap the graph break in an `UncapturedHigherOrderOpError`, as
before; `wrap` and checkpoint raise it as `Unsupported`.)

**BC note.** Code that matched the old graph-break types or texts of these
refusals ("HOP: Unsafe side effect", "HOP: Non-nullified side effect" for an
`nn.Module`) now sees "nn.Module mutation in HigherOrderOp". `self.w += 1` in
an `autograd.Function` forward (or a `nested_compile_region` body) raised
`InternalTorchDynamoError` and now raises
`Unsupported` ("HOP: aliased intermediate used outside the subgraph"), and
with `fullgraph=False` falls back to eager instead of failing. A new
attribute of an outer plain object in a HigherOrderOp body gets "HOP: Unsafe
side effect" instead of the repr of an `AttributeError`.
`graph_break_registry.json` gets the new entry of GB1177 and a new gb_type.

## Cost

Every store reaches the new helper only where Dynamo already refused it; a
parameter, buffer or submodule store asks `tx.output.is_root_tracer()` first.
Dynamo traces of workloads that refuse nothing, {cost(version)}

## Test plan

Run on torch {torch_version} (CPU), with and without this PR:

- `{patched["command"]}` (new, {patched["tests"]} tests: every form of the
  mutation in every HigherOrderOp that refuses it, on inlined and non-inlined
  modules, and the controls above; its helpers, and the issue's reproducer,
  are in the new `test/dynamo/_hop_mutation_test_utils.py`): with this PR
  {patched["passed"]} of {patched["tests"]} passed in {patched["seconds"]} s \
(exit code {patched["exit_code"]}); without it {pristine["failed"]} failed (the error
  tests) and {pristine["passed"]} passed (the controls), exit code \
{pristine["exit_code"]}.
{upstream_plan(version)}
{checks_plan(version)}

Changed tests: `test/dynamo/_test_misc_part4.py::test_map_side_effects`
asserts the new explanation instead of any error that names `map_impl`;
`test/higher_order_ops/test_invoke_subgraph.py::test_side_effect_with_aliased_intermediate`
asserts the graph break instead of the internal error.

Not run here: lintrunner itself and mypy's daemon over the whole tree (the
checks above are their settings on the changed files), and CUDA tests.
"""


def main() -> int:
    install = InstalledTorch.find()
    version = install.version
    found = series.load_series(bundle.data_root() / "patches", version)
    OUT.mkdir(parents=True, exist_ok=True)
    patch = OUT / f"fix-{ISSUE}.patch"
    torchpatch("export", "--torch-version", version, str(patch))
    check_applies(patch, found, install.root)
    table, tests = before_after(version)
    title = f"[dynamo] {found.patches[0].subject.removeprefix('[dynamo] ')}"
    text = f"# {title}\n\n{body(version, table, tests, found)}"
    (OUT / "PR.md").write_text(text)
    (OUT / "results.json").write_text(json.dumps(tests, indent=2) + "\n")
    torchpatch("apply")
    print(f"wrote {patch} and {OUT / 'PR.md'} (torch {metadata.version('torch')})")
    print(f"{tests['test']}: patched {tests['patched']}, pristine {tests['pristine']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
