"""How much of a series a target's files carry.

The files carry the first k patches of the series exactly when unapplying
those k patches gives the pristine files (for an installed torch: the
files its RECORD hashes) and applying them again gives back the files as
they are. Anything else is a local modification torchpatch will not touch.
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
class SeriesState:
    patches: tuple[Patch, ...]  # the patches with hunks for this target
    current: Snapshot
    pristine: Snapshot | None  # None when the files are locally modified
    applied: int | None  # leading patches the files carry; None as above

    @property
    def fully_applied(self) -> bool:
        return self.applied == len(self.patches)

    def patch_status(self, index: int) -> str:
        if self.applied is None:
            return "conflicting"
        return "applied" if index < self.applied else "not applied"


def inspect(target: Target, series: Series) -> SeriesState:
    paths = [f for f in series.files if target.includes(f)]
    patches = tuple(
        p for p in series.patches if any(target.includes(f) for f in p.files)
    )
    current = snapshots.read(target.root, paths)
    for applied in range(len(patches), -1, -1):
        carried = patches[:applied]
        try:
            pristine = snapshots.patched(current, carried, reverse=True)
        except PatchDoesNotApply:
            continue
        if any(target.matches_record(p, pristine[p]) is False for p in paths):
            continue
        if snapshots.patched(pristine, carried) != current:
            continue
        return SeriesState(patches, current, pristine, applied)
    return SeriesState(patches, current, None, None)


def modified_files(target: Target, state: SeriesState) -> list[str]:
    """The files that differ from the target's record of its pristine state."""
    return [
        path
        for path, data in state.current.items()
        if target.matches_record(path, data) is False
    ]
