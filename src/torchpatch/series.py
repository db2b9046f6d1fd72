"""A patch series: `patches/torch-<version>/series` and the patches it lists.

The series file is quilt's: one patch file name per line, applied in order;
blank lines and lines starting with `#` are ignored. Every patch is in
`git format-patch` form with paths relative to the PyTorch source root.
A `tests` file next to it lists the maintainers' tests of the series
(tools/series_tests.py reads it); torchpatch does not read it.

A series is made against one release, its folder's name. An optional
`releases` file lists, one a line, every release it was proven on (its tests
pass there and its fix tests fail on the pristine wheel); without one it
serves its own release only. torchpatch picks the series that lists the
installed release and refuses any other release. A `HEADER` file says, in
DEP-3 fields, what the series is and how it differs from the series it was
rebased from (`make rebase` writes one); torchpatch does not read it.
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from torchpatch.errors import MalformedSeries, UnsupportedVersion

SERIES_FILE = "series"
RELEASES_FILE = "releases"
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_SUBJECT_PREFIX = re.compile(r"^\[PATCH[^\]]*\]\s*")


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path
    subject: str
    files: tuple[str, ...]  # paths it touches, relative to the source root

    def read(self) -> bytes:
        return self.path.read_bytes()


@dataclass(frozen=True)
class Series:
    version: str  # the release it was made against
    directory: Path
    patches: tuple[Patch, ...]
    releases: tuple[str, ...] = ()  # every release it serves

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted({f for patch in self.patches for f in patch.files}))


def version_key(version: str) -> tuple[int, ...]:
    """Release order: 2.4.1 < 2.6.0 < 2.13.0 (not the order of the strings)."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


def served_releases(patches_root: Path) -> dict[str, Path]:
    """{release: the series folder that serves it}, in release order."""
    served: dict[str, Path] = {}
    for directory in sorted(patches_root.glob("torch-*")):
        if not (directory / SERIES_FILE).is_file():
            continue
        for release in _releases(directory):
            if release in served:
                raise MalformedSeries(
                    f"torch {release} is served by both {served[release]} "
                    f"and {directory}"
                )
            served[release] = directory
    return dict(sorted(served.items(), key=lambda item: version_key(item[0])))


def supported_versions(patches_root: Path) -> list[str]:
    return list(served_releases(patches_root))


def _releases(directory: Path) -> tuple[str, ...]:
    releases_file = directory / RELEASES_FILE
    if not releases_file.is_file():
        return (directory.name.removeprefix("torch-"),)
    releases = []
    for where, line in listed_lines(releases_file):
        if not _RELEASE.match(line):
            raise MalformedSeries(f"{where}: {line!r} is not a release like 2.4.1")
        if line in releases:
            raise MalformedSeries(f"{where}: {line!r} is listed twice")
        releases.append(line)
    if not releases:
        raise MalformedSeries(f"{releases_file}: lists no release")
    return tuple(releases)


def load_series(patches_root: Path, version: str) -> Series:
    served = served_releases(patches_root)
    if version not in served:
        releases = list(served)
        supported = ", ".join(releases) or "none"
        if len(releases) > 1:
            supported = (
                f"{releases[0]} to {releases[-1]} "
                f"({len(releases)} releases: {supported})"
            )
        raise UnsupportedVersion(
            f"no patch series for torch {version}; supported versions: {supported}"
        )
    directory = served[version]
    series_file = directory / SERIES_FILE
    names = _parse_series_file(series_file)
    listed = set(names)
    unlisted = sorted(p.name for p in directory.glob("*.patch") if p.name not in listed)
    if unlisted:
        raise MalformedSeries(
            f"{series_file}: patch files not listed in the series: {', '.join(unlisted)}"
        )
    return Series(
        version=directory.name.removeprefix("torch-"),
        directory=directory,
        patches=tuple(_load_patch(directory / name) for name in names),
        releases=tuple(r for r, d in served.items() if d == directory),
    )


def listed_lines(listing: Path) -> Iterator[tuple[str, str]]:
    """(where, line) of each line that is not blank or a comment."""
    for lineno, raw in enumerate(listing.read_text().splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield f"{listing}:{lineno}", line


def _parse_series_file(series_file: Path) -> list[str]:
    names: list[str] = []
    for where, line in listed_lines(series_file):
        if len(line.split()) != 1:
            raise MalformedSeries(
                f"{where}: expected one patch file name, got {line!r}"
            )
        if "/" in line or "\\" in line or line.startswith("."):
            raise MalformedSeries(
                f"{where}: {line!r} must name a file in {series_file.parent}"
            )
        if line in names:
            raise MalformedSeries(f"{where}: {line!r} is listed twice")
        if not (series_file.parent / line).is_file():
            raise MalformedSeries(f"{where}: {line!r} does not exist")
        names.append(line)
    return names


def _load_patch(path: Path) -> Patch:
    text = path.read_bytes().decode("utf-8", errors="replace")
    message = email.message_from_string(text, policy=email.policy.default)
    subject = str(message.get("Subject", "")).strip()
    if not text.startswith("From ") or not subject:
        raise MalformedSeries(
            f"{path}: not in `git format-patch` form (no 'From ' line or Subject: header)"
        )
    files = tuple(dict.fromkeys(b for _, b in _DIFF_HEADER.findall(text)))
    if not files:
        raise MalformedSeries(f"{path}: contains no `diff --git` hunks")
    return Patch(
        name=path.name,
        path=path,
        subject=_SUBJECT_PREFIX.sub("", subject),
        files=files,
    )
