"""The git commands torchpatch runs: `git apply`, and its --stat for export.

git runs with GIT_CEILING_DIRECTORIES set so that it never mistakes a
surrounding checkout (a virtualenv inside a repository, say) for the tree
it works on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from torchpatch.errors import GitFailed, GitNotFound, PatchDoesNotApply


def _git() -> str:
    git = shutil.which("git")
    if git is None:
        raise GitNotFound(
            "git is not on PATH; torchpatch applies patches with `git apply`"
        )
    return git


def _run(
    args: Sequence[str], cwd: Path, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(cwd.parent), LC_ALL="C")
    return subprocess.run(
        [_git(), *args], cwd=cwd, input=stdin, capture_output=True, env=env, check=False
    )


def apply(
    patch: Path, tree: Path, includes: Sequence[str], reverse: bool = False
) -> None:
    """Apply patch (only its hunks for includes) to the files under tree."""
    args = ["apply", "--whitespace=nowarn"]
    if reverse:
        args.append("--reverse")
    args += [f"--include={path}" for path in includes]
    proc = _run([*args, str(patch)], cwd=tree)
    if proc.returncode != 0:
        how = "in reverse " if reverse else ""
        detail = "; ".join(proc.stderr.decode(errors="replace").strip().splitlines())
        raise PatchDoesNotApply(f"{patch.name} does not apply {how}cleanly: {detail}")


SCRATCH_PREFIX = "torchpatch-"


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder named for this process, so that a later run can
    tell one that a killed run left (snapshots.leftovers())."""
    return tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def diffstat(diff: bytes) -> bytes:
    """The diffstat and summary that format-patch puts above the diff."""
    with scratch_dir() as tmp:  # outside any repository, whose subfolder would filter
        proc = _run(["apply", "--stat", "--summary", "-"], cwd=Path(tmp), stdin=diff)
    if proc.returncode != 0:
        raise GitFailed(_failure("git apply --stat", proc))
    return proc.stdout


def _failure(command: str, proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = proc.stderr.decode(errors="replace").strip().splitlines()
    return f"{command} failed (exit {proc.returncode}): {lines[0] if lines else 'no output'}"
