"""status, apply and revert: each decides from the series state, then writes."""

from __future__ import annotations

from dataclasses import dataclass

from torchpatch import snapshots, state, writes
from torchpatch.errors import LocallyModified, TorchPatchError
from torchpatch.series import Series
from torchpatch.snapshots import Snapshot
from torchpatch.state import SeriesState, Target
from torchpatch.targets import InstalledTorch


@dataclass(frozen=True)
class Outcome:
    changed: list[str]  # files written (or that would be, with check)
    message: str


def status(target: Target, series: Series) -> dict:
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
        "state": _summary(found),
        "patches": [
            {
                "name": patch.name,
                "subject": patch.subject,
                "status": found.patch_status(i),
            }
            for i, patch in enumerate(found.patches)
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
    if found.fully_applied:
        return Outcome(
            [],
            f"already applied: {target.description} carries all "
            f"{_patches(len(found.patches))} of {series.directory}; nothing to do",
        )
    remaining = found.patches[found.applied :]
    new = snapshots.patched(found.current, remaining)
    changed = _write(target, found.current, new, check)
    verb = "would apply" if check else "applied"
    return Outcome(
        changed, f"{verb} {_patches(len(remaining))} to {target.description}"
    )


def revert(target: Target, series: Series, check: bool = False) -> Outcome:
    found = _inspect_unmodified(target, series)
    if found.applied == 0:
        return Outcome([], f"already pristine: {target.description}; nothing to do")
    assert found.pristine is not None
    changed = _write(target, found.current, found.pristine, check)
    if check:
        return Outcome(
            changed, f"would revert {_patches(found.applied)} of {target.description}"
        )
    _verify_written(target, found.pristine)
    verified = (
        "; the files match the wheel's RECORD"
        if isinstance(target, InstalledTorch)
        else ""
    )
    return Outcome(
        changed,
        f"reverted {_patches(found.applied)} of {target.description}{verified}",
    )


def _write(target: Target, old: Snapshot, new: Snapshot, check: bool) -> list[str]:
    """Write what changes from old to new, or with check only say what would."""
    if check:
        changed = writes.changed_paths(old, new)
        writes.check_writable(target.root, changed)
        return changed
    return writes.write(target.root, old, new)


def _verify_written(target: Target, expected: Snapshot) -> None:
    on_disk = snapshots.read(target.root, list(expected))
    if on_disk != expected or any(
        target.matches_record(path, data) is False for path, data in on_disk.items()
    ):
        raise TorchPatchError(
            "the reverted files do not read back as the pristine ones; reinstall: "
            f"{target.reinstall_command}"
        )


def _inspect_unmodified(target: Target, series: Series) -> SeriesState:
    found = state.inspect(target, series)
    if found.applied is None:
        modified = state.modified_files(target, found) or list(found.current)
        raise LocallyModified(
            "refusing to touch files that are neither pristine nor patched by "
            f"{series.directory}:\n"
            + "".join(f"  {path}\n" for path in modified)
            + f"restore them with: {target.reinstall_command}"
        )
    return found


def _summary(found: SeriesState) -> str:
    if found.applied is None:
        return "modified"
    if found.applied == 0:
        return "pristine"
    return "applied" if found.fully_applied else "partially applied"


def _patches(count: int) -> str:
    return f"{count} patch" if count == 1 else f"{count} patches"
