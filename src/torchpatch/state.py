"""How much of a series a target's files carry, judged file by file.

A file carries the first k of the patches that touch it exactly when
unapplying those k patches gives the pristine file (for an installed torch:
the file its RECORD hashes) and applying them again gives back the file as
it is. Files are judged one by one, so an apply or revert that was killed
between two writes leaves a state torchpatch can complete in either
direction. A file that carries no prefix of its patches is a local
modification torchpatch will not touch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from torchpatch import snapshots
from torchpatch.errors import PatchDoesNotApply
from torchpatch.series import Patch, Series
from torchpatch.snapshots import Snapshot
from torchpatch.targets import InstalledTorch, SourceTree

Target = Union[InstalledTorch, SourceTree]


@dataclass(frozen=True)
class FileState:
    patches: tuple[Patch, ...]  # the series' patches that touch this file
    applied: int | None  # how many of them it carries; None: modified
    pristine: bytes | None  # its pristine bytes (None: absent or unknown)


@dataclass(frozen=True)
class SeriesState:
    patches: tuple[Patch, ...]  # the patches with hunks for this target
    current: Snapshot
    files: dict[str, FileState]

    @property
    def modified(self) -> list[str]:
        return [p for p, f in self.files.items() if f.applied is None]

    @property
    def pristine(self) -> Snapshot:
        assert not self.modified
        return {path: f.pristine for path, f in self.files.items()}

    @property
    def is_pristine(self) -> bool:
        return all(f.applied == 0 for f in self.files.values())

    @property
    def fully_applied(self) -> bool:
        return all(f.applied == len(f.patches) for f in self.files.values())

    def patch_status(self, patch: Patch) -> str:
        if self.modified:
            return "conflicting"
        carried = {
            f.patches.index(patch) < (f.applied or 0)
            for f in self.files.values()
            if patch in f.patches
        }
        if carried == {True}:
            return "applied"
        return "not applied" if carried == {False} else "partly applied"

    @property
    def summary(self) -> str:
        if self.modified:
            return "modified"
        if self.is_pristine:
            return "pristine"
        return "applied" if self.fully_applied else "partially applied"


def inspect(target: Target, series: Series) -> SeriesState:
    paths = [f for f in series.files if target.includes(f)]
    patches = tuple(
        p for p in series.patches if any(target.includes(f) for f in p.files)
    )
    current = snapshots.read(target.root, paths)
    files = {
        path: _inspect_file(
            target, path, current[path], tuple(p for p in patches if path in p.files)
        )
        for path in paths
    }
    return SeriesState(patches, current, files)


def _inspect_file(
    target: Target, path: str, data: bytes | None, patches: tuple[Patch, ...]
) -> FileState:
    current = {path: data}
    for applied in range(len(patches), -1, -1):
        carried = patches[:applied]
        try:
            pristine = snapshots.patched(current, carried, reverse=True)
        except PatchDoesNotApply:
            continue
        if target.matches_record(path, pristine[path]) is False:
            continue
        if snapshots.patched(pristine, carried) != current:
            continue
        return FileState(patches, applied, pristine[path])
    return FileState(patches, None, None)
