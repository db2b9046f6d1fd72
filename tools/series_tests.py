"""A series' tests (its `tests` file), and its export with them.

Each line of `patches/torch-<release>/tests` names a file under fix_tests/:
`FILE` runs here only; `FILE -> PATH` is also added by the pull request as
PATH under test/ (`FILE -> PATH (imported)`: another file imports and runs
it). A file not named test_*.py is a helper module. Where a commit of the
series creates PATH, FILE must equal what the series leaves there.

    python -m tools.series_tests           # rewrite stale carried copies
    python -m tools.series_tests --check   # fail if one is stale (make lint)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from tools.plumbing import ROOT, new_file_diff
from torchpatch import export, git, series, snapshots
from torchpatch.errors import MalformedSeries

TESTS_FILE = "tests"


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
    for where, line in series.listed_lines(listing) if listing.is_file() else ():
        path, arrow, upstream = (part.strip() for part in line.partition("->"))
        imported = upstream.endswith("(imported)")
        upstream = upstream.removesuffix("(imported)").strip()
        bad = [f"{line!r} names no upstream path"] if arrow and not upstream else []
        for listed, tree in ((path, "fix_tests"), (upstream, "test")):
            parts = Path(listed).parts
            wrong = parts[:1] != (tree,) or ".." in parts or len(listed.split()) != 1
            if wrong and (listed or tree == "fix_tests"):
                bad.append(f"{listed!r} must be a path under {tree}/")
        if not (root / path).is_file():
            bad.append(f"{path!r} does not exist")
        if any(path == t.path for t in result):
            bad.append(f"{path!r} is listed twice")
        if upstream and any(upstream == t.upstream for t in result):
            bad.append(f"{upstream!r} is exported twice")
        if bad:
            raise MalformedSeries(f"{where}: {bad[0]}")
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
        if not any(t.upstream in p.files for p in found.patches)
    )
    return export.build(found, extra)


def _stale(found: series.Series, root: Path) -> list[tuple[TestFile, series.Patch]]:
    """Each exported file that a patch creates, where what the series leaves
    there (from that patch on) is not FILE; with that patch."""
    stale = []
    for test in exported(found, root):
        writers = [p for p in found.patches if test.upstream in p.files]
        left = snapshots.patched({test.upstream: None}, writers)[test.upstream]
        if writers and left != (root / test.path).read_bytes():
            stale.append((test, writers[0]))
    return stale


def problems(found: series.Series, root: Path = ROOT) -> list[str]:
    """A line for each carried test file that is stale."""
    return [
        f"{p.path} creates {t.upstream} unlike {t.path}" for t, p in _stale(found, root)
    ]


def refresh(found: series.Series, root: Path = ROOT) -> list[Path]:
    """Rewrites each stale carried file's section from FILE; the patches changed."""
    changed = []
    for test, patch in _stale(found, root):
        if sum(test.upstream in p.files for p in found.patches) > 1:
            raise MalformedSeries(
                f"{test.upstream} is written by several patches of "
                f"{found.directory}: edit the stack, then copy its text to {test.path}"
            )
        head, sep, rest = patch.read().partition(b"\n---\n")
        start = rest.index(b"diff --git ")
        section = rest.index(f"diff --git a/{test.upstream} b/".encode())
        signature = rest.rfind(b"\n-- \n") + 1 or len(rest)
        following = rest.find(b"\ndiff --git ", section) + 1 or signature
        new = new_file_diff(root / test.path, test.upstream)
        diff = rest[start:section] + new + rest[following:signature]
        stat = git.diffstat(diff)
        patch.path.write_bytes(head + sep + stat + b"\n" + diff + rest[signature:])
        changed.append(patch.path)
    return changed


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        raise SystemExit("usage: python -m tools.series_tests [--check]")
    stale = []
    for version in series.supported_versions(ROOT / "patches"):
        found = series.load_series(ROOT / "patches", version)
        if found.version != version:
            continue  # a series serving several releases: once, at its own
        if argv:
            stale += problems(found)
        else:
            for path in refresh(found):
                print(f"rewrote {path.relative_to(ROOT)}")
    for problem in stale:
        print(f"series tests: {problem}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
