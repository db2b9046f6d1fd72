"""File contents in memory, and patches applied to them off to the side.

A snapshot maps paths (relative to a target's root) to their bytes, or to
None for an absent file. Patches are applied to a copy in a temporary
directory, never to the target, so a failure leaves the target untouched;
one that a killed run left is found (leftovers()) and removed by the next.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from torchpatch import git
from torchpatch.series import Patch

Snapshot = dict[str, Optional[bytes]]


def read(root: Path, paths: Sequence[str]) -> Snapshot:
    snapshot: Snapshot = {}
    for path in paths:
        file = root / path
        snapshot[path] = file.read_bytes() if file.is_file() else None
    return snapshot


def patched(
    snapshot: Snapshot, patches: Sequence[Patch], reverse: bool = False
) -> Snapshot:
    """snapshot with patches applied in order (or unapplied, last first)."""
    if not patches:
        return dict(snapshot)
    paths = list(snapshot)
    with git.scratch_dir() as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        for path, data in snapshot.items():
            if data is not None:
                file = tree / path
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(data)
        for patch in reversed(patches) if reverse else patches:
            git.apply(patch.path, tree, includes=paths, reverse=reverse)
        return read(tree, paths)


def leftovers() -> list[str]:
    """The temporary folders of torchpatch runs that were killed: named for
    a process that no longer runs (git.scratch_dir())."""
    found = []
    for folder in Path(tempfile.gettempdir()).glob(f"{git.SCRATCH_PREFIX}*-*"):
        pid = folder.name.removeprefix(git.SCRATCH_PREFIX).partition("-")[0]
        if pid.isdigit() and not _running(int(pid)):
            found.append(str(folder))
    return sorted(found)


def remove_leftovers() -> list[str]:
    """Delete leftovers(); return them."""
    removed = leftovers()
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
