"""Writing a snapshot back to a target, all or nothing.

Each changed file is written to a new file beside it and renamed over it,
so the old inode, which an installer may share with its package cache
through a hard link, is never written to. A process killed between the two
leaves that new file, `.<name>.<random>.tmp`, beside the file: strays()
finds such files of the series' files, and remove_strays() deletes them.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from torchpatch.errors import NotWritable
from torchpatch.snapshots import Snapshot


def changed_paths(old: Snapshot, new: Snapshot) -> list[str]:
    return [path for path in new if new[path] != old.get(path)]


def check_writable(root: Path, paths: list[str]) -> None:
    for directory in sorted({(root / p).parent for p in paths}):
        if not os.access(directory, os.W_OK):
            raise NotWritable(
                f"cannot write to {directory}: the install is read-only for this "
                "user; run torchpatch as the user that installed torch, or patch a "
                "virtualenv you own"
            )


def write(root: Path, old: Snapshot, new: Snapshot) -> list[str]:
    """Replace the files that differ between old and new; return their paths."""
    paths = changed_paths(old, new)
    check_writable(root, paths)
    done: list[str] = []
    for path in paths:
        try:
            _replace(root / path, new[path])
        except OSError as error:
            for written in reversed(done):
                _replace(root / written, old[written])
            raise NotWritable(
                f"could not write {root / path}: {error}; nothing was changed"
            ) from error
        done.append(path)
    for path in paths:
        _remove_bytecode(root / path)
    return paths


def strays(root: Path, paths: list[str]) -> list[str]:
    """The temporary files a killed write of one of paths left in root."""
    found: set[str] = set()
    for path in paths:
        file = root / path
        if file.parent.is_dir():
            found.update(
                str(stray.relative_to(root).as_posix())
                for stray in file.parent.glob(f".{file.name}.*.tmp")
            )
    return sorted(found)


def remove_strays(root: Path, paths: list[str]) -> list[str]:
    """Delete strays(root, paths); return them."""
    removed = strays(root, paths)
    for stray in removed:
        (root / stray).unlink(missing_ok=True)
    return removed


def _replace(file: Path, data: bytes | None) -> None:
    if data is None:
        file.unlink(missing_ok=True)
        return
    mode = stat.S_IMODE(file.stat().st_mode) if file.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_bytecode(file: Path) -> None:
    # Python would notice the new mtime anyway; removing the stale bytecode
    # keeps an edited module from ever being served from a cached .pyc.
    for pyc in (file.parent / "__pycache__").glob(f"{file.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)
