"""status, apply and revert: each decides from the series state, then writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchpatch import snapshots, state, writes
from torchpatch.errors import LocallyModified, WrittenButNotVerified
from torchpatch.series import Patch, Series
from torchpatch.snapshots import Snapshot
from torchpatch.state import SeriesState, Target
from torchpatch.targets import InstalledTorch


@dataclass(frozen=True)
class Outcome:
    changed: list[str]  # files written (or that would be, with check)
    message: str


def status(target: Target, series: Series) -> dict[str, Any]:
    found = state.inspect(target, series)
    return {
        "target": {
            "kind": target.kind,
            "root": str(target.root),
            "version": target.version,
        },
        "series": {
            "version": series.version,
            "directory": str(series.directory),
        },
        "state": found.summary,
        # Temporary files a killed apply or revert left; the next removes them.
        "stray_files": writes.strays(target.root, _paths(target, series)),
        # And the temporary folders of a killed run (snapshots.leftovers()).
        "leftover_folders": snapshots.leftovers(),
        # How to restore files that are neither pristine nor patched.
        "repair": target.reinstall_command if found.modified else None,
        "patches": [
            {
                "name": patch.name,
                "subject": patch.subject,
                "status": found.patch_status(patch),
            }
            for patch in found.patches
        ],
        "files": [
            {
                "path": path,
                "exists": data is not None,
                "matches_record": target.matches_record(path, data),
            }
            for path, data in found.current.items()
        ],
    }


def apply(target: Target, series: Series, check: bool = False) -> Outcome:
    found = _inspect_unmodified(target, series)
    removed = _remove_strays(target, series, check)
    if found.fully_applied:
        count = len(found.patches)
        carried = "the patch" if count == 1 else f"all {_patches(count)}"
        return Outcome(
            [],
            f"already applied: {target.description} carries {carried} of "
            f"{series.directory}; nothing to do{_strays(removed, check)}",
        )
    remaining = _patches_not(found, "applied")
    new = snapshots.patched(found.pristine, found.patches)
    changed = _write(target, found.current, new, check)
    verb = "would apply" if check else "applied"
    return Outcome(
        changed,
        f"{verb} {_patches(len(remaining))} to {target.description}"
        f"{_strays(removed, check)}",
    )


def revert(target: Target, series: Series, check: bool = False) -> Outcome:
    found = _inspect_unmodified(target, series)
    removed = _remove_strays(target, series, check)
    if found.is_pristine:
        return Outcome(
            [],
            f"already pristine: {target.description}; nothing to do"
            f"{_strays(removed, check)}",
        )
    carried = _patches_not(found, "not applied")
    changed = _write(target, found.current, found.pristine, check)
    if check:
        return Outcome(
            changed,
            f"would revert {_patches(len(carried))} of {target.description}"
            f"{_strays(removed, check)}",
        )
    _verify_written(target, found.pristine)
    verified = (
        "; the files match the wheel's RECORD"
        if isinstance(target, InstalledTorch)
        else ""
    )
    return Outcome(
        changed,
        f"reverted {_patches(len(carried))} of {target.description}{verified}"
        f"{_strays(removed, check)}",
    )


def _remove_strays(target: Target, series: Series, check: bool) -> list[str]:
    """The temporary files and folders a killed run left: removed, or with
    check listed."""
    paths = _paths(target, series)
    if check:
        return writes.strays(target.root, paths) + snapshots.leftovers()
    return writes.remove_strays(target.root, paths) + snapshots.remove_leftovers()


def _paths(target: Target, series: Series) -> list[str]:
    return [path for path in series.files if target.includes(path)]


def _strays(removed: list[str], check: bool) -> str:
    if not removed:
        return ""
    verb = "would remove" if check else "removed"
    return f"; {verb} what a killed run left: {', '.join(removed)}"


def _write(target: Target, old: Snapshot, new: Snapshot, check: bool) -> list[str]:
    """Write what changes from old to new, or with check only say what would."""
    if check:
        changed = writes.changed_paths(old, new)
        writes.check_writable(target.root, changed)
        return changed
    return writes.write(target.root, old, new)


def _verify_written(target: Target, expected: Snapshot) -> None:
    """After a revert has written: the files must read back as the wheel's."""
    on_disk = snapshots.read(target.root, list(expected))
    wrong = [
        path
        for path, data in on_disk.items()
        if data != expected.get(path) or target.matches_record(path, data) is False
    ]
    if wrong or on_disk.keys() != expected.keys():
        raise WrittenButNotVerified(
            f"reverted {target.description}, but {', '.join(wrong) or 'the files'} "
            f"do not read back as the wheel's; restore them with: "
            f"{target.reinstall_command}"
        )


def _inspect_unmodified(target: Target, series: Series) -> SeriesState:
    found = state.inspect(target, series)
    if found.modified:
        raise LocallyModified(
            "refusing to touch files that are neither pristine nor patched by "
            f"{series.directory}: {', '.join(found.modified)}; restore them "
            f"with: {target.reinstall_command}"
        )
    return found


def _patches_not(found: SeriesState, status: str) -> list[Patch]:
    """The patches whose status is not the given one: what is left to do."""
    return [p for p in found.patches if found.patch_status(p) != status]


def _patches(count: int) -> str:
    return f"{count} patch" if count == 1 else f"{count} patches"
