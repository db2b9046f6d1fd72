"""A series' tests: its `tests` file, and the upstream patch with them.

`patches/torch-<release>/tests` lists, one a line, this project's test files
for the series, under fix_tests/: `FILE` for one that only this project runs
(an extended suite), `FILE -> PATH` for one the pull request adds as PATH
under PyTorch's test/. A file named test_*.py is run; any other is a helper
module the test files import, as is a test file listed `FILE -> PATH
(imported)`, whose tests another file imports and runs in its own way.

with_tests() is `torchpatch export` plus a new-file section for each PATH
the series' own commits do not create. A series whose test commit creates
PATH (so that `git am` of the series gives a reviewer the whole pull
request) carries that file, which later commits may extend: FILE must
equal what the series leaves at PATH.

    python -m tools.series_tests           # rewrite stale carried copies
    python -m tools.series_tests --check   # fail if one is stale (make lint)
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.plumbing import ROOT, git, new_file_diff
from torchpatch import export, git as torchpatch_git, series
from torchpatch.errors import MalformedSeries

TESTS_FILE = "tests"
TESTS_DIR = "fix_tests"
_SEPARATOR = b"\n---\n"


@dataclass(frozen=True)
class TestFile:
    path: str  # in this repository, under fix_tests/
    upstream: str = ""  # where the pull request adds it, if it does
    imported: bool = False  # exported for the test files that import it

    @property
    def runs(self) -> bool:
        return Path(self.path).name.startswith("test_") and not self.imported


def tests(found: series.Series, root: Path = ROOT) -> list[TestFile]:
    """The test files a series lists; MalformedSeries for a bad line."""
    listing = found.directory / TESTS_FILE
    result: list[TestFile] = []
    if not listing.is_file():
        return result
    for number, raw in enumerate(listing.read_text().splitlines(), 1):
        line, where = raw.strip(), f"{listing}:{number}"
        if not line or line.startswith("#"):
            continue
        path, arrow, upstream = (part.strip() for part in line.partition("->"))
        imported = upstream.endswith("(imported)")
        upstream = upstream.removesuffix("(imported)").strip()
        if arrow and not upstream:
            raise MalformedSeries(f"{where}: {line!r} names no upstream path")
        for listed, tree in [(path, TESTS_DIR)] + (
            [(upstream, "test")] if arrow else []
        ):
            parts = Path(listed).parts
            if Path(listed).is_absolute() or ".." in parts or parts[0] != tree \
                    or len(listed.split()) != 1:  # fmt: skip
                raise MalformedSeries(
                    f"{where}: {listed!r} must be a path under {tree}/"
                )
        if not (root / path).is_file():
            raise MalformedSeries(f"{where}: {path!r} does not exist")
        if any(path == t.path for t in result):
            raise MalformedSeries(f"{where}: {path!r} is listed twice")
        if arrow and any(upstream == t.upstream for t in result):
            raise MalformedSeries(f"{where}: {upstream!r} is exported twice")
        result.append(TestFile(path, upstream, imported))
    return result


def exported(found: series.Series, root: Path = ROOT) -> list[TestFile]:
    return [t for t in tests(found, root) if t.upstream]


def with_tests(found: series.Series, root: Path = ROOT) -> bytes:
    """`torchpatch export` of the series, with the test files it exports."""
    stale = problems(found, root)
    if stale:
        raise MalformedSeries(
            f"{stale[0]}; rewrite it with `python -m tools.series_tests`"
        )
    extra = b"".join(
        new_file_diff(root / t.path, t.upstream)
        for t in exported(found, root)
        if _carrier(found, t.upstream) is None
    )
    return export.build(found, extra)


def _carrier(found: series.Series, upstream: str) -> series.Patch | None:
    """The patch of the series that creates upstream, if one does."""
    return next((p for p in found.patches if upstream in p.files), None)


def _stale(found: series.Series, root: Path) -> list[tuple[TestFile, series.Patch]]:
    """Each carried test file whose text, as the series leaves it, is not FILE."""
    stale = []
    for test in exported(found, root):
        carrier = _carrier(found, test.upstream)
        if (
            carrier is not None
            and _left(found, carrier, test.upstream) != (root / test.path).read_bytes()
        ):
            stale.append((test, carrier))
    return stale


def problems(found: series.Series, root: Path = ROOT) -> list[str]:
    """A line for each carried test file that is stale."""
    return [f"{patch.path} creates {test.upstream} unlike {test.path}"
            for test, patch in _stale(found, root)]  # fmt: skip


def _left(found: series.Series, carrier: series.Patch, upstream: str) -> bytes:
    """What the series leaves at upstream, from the commit that creates it on."""
    with tempfile.TemporaryDirectory() as tmp:
        for patch in found.patches[found.patches.index(carrier) :]:
            if upstream in patch.files:
                git(
                    Path(tmp),
                    "apply",
                    f"--include={upstream}",
                    str(patch.path.resolve()),
                )
        return (Path(tmp) / upstream).read_bytes()


def refresh(found: series.Series, root: Path = ROOT) -> list[Path]:
    """Rewrites each stale carried file's section from FILE; the patches changed."""
    changed = []
    for test, patch in _stale(found, root):
        if sum(test.upstream in p.files for p in found.patches) > 1:
            raise MalformedSeries(
                f"{test.upstream} is written by several patches of "
                f"{found.directory}: edit the stack, then copy its text to {test.path}"
            )
        head, sep, rest = patch.read().partition(_SEPARATOR)
        start = rest.index(b"diff --git ")
        section = rest.index(f"diff --git a/{test.upstream} b/".encode())
        signature = rest.rfind(b"\n-- \n") + 1 or len(rest)
        following = rest.find(b"\ndiff --git ", section) + 1 or signature
        diff = (rest[start:section] + new_file_diff(root / test.path, test.upstream)
                + rest[following:signature])  # fmt: skip
        stat = torchpatch_git.diffstat(diff)
        patch.path.write_bytes(head + sep + stat + b"\n" + diff + rest[signature:])
        changed.append(patch.path)
    return changed


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        raise SystemExit("usage: python -m tools.series_tests [--check]")
    found_problems = []
    for version in series.supported_versions(ROOT / "patches"):
        found = series.load_series(ROOT / "patches", version)
        if found.version != version:
            continue  # a series serving several releases: once, at its own
        if check:
            found_problems += problems(found)
        else:
            for path in refresh(found):
                print(f"rewrote {path.relative_to(ROOT)}")
    for problem in found_problems:
        print(f"series tests: {problem}", file=sys.stderr)
    return 1 if found_problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
