"""Every derived series equals the replay of the series it is derived from.

A series whose HEADER says `Origin: ... by make rebase ...` and
`Rebased-From: torch-FROM` is made by `make rebase FROM=FROM TO=<its
release>` (tools/rebase.py), never edited by hand: its conflicts are
replayed from the resolutions recorded in its `rerere/` folder. This replays
each such series into a scratch folder, from FROM's series and the wheels of
both releases, and fails where the patches or their order differ from the
series in patches/, or where the replay stops on a conflict that no recorded
resolution resolves: the series was not regenerated after FROM changed.

    python -m tools.series_check            # make series-check
    python -m tools.series_check 2.14.1     # only these series

The series edited by hand (the era heads, and the series of the older eras
that are not yet derived) are listed, and not checked.
"""

from __future__ import annotations

import filecmp
import sys
import tempfile
from pathlib import Path

from tools import rebase
from tools.plumbing import BUILD, ROOT, dep3
from torchpatch import series as series_

PATCHES = ROOT / "patches"


def parent(series_dir: Path) -> str | None:
    """FROM of a derived series: the one release its HEADER's Rebased-From
    names, where its Origin says it was made by `make rebase`."""
    fields = dep3((series_dir / "HEADER").read_text())
    origin, rebased_from = fields.get("Origin", ""), fields.get("Rebased-From", "")
    if "make rebase" not in origin:
        return None
    name = rebased_from.split()[0] if rebased_from else ""
    return name.removeprefix("torch-") if name.startswith("torch-") else None


def differences(expected: Path, replayed: Path) -> list[str]:
    """How the replayed series differs from the one in patches/."""
    found = []
    names = sorted(p.name for p in expected.glob("*.patch"))
    again = sorted(p.name for p in replayed.glob("*.patch"))
    if names != again:
        found.append(f"patches {names} != replayed {again}")
    for name in sorted(set(names) & set(again)):
        if not filecmp.cmp(expected / name, replayed / name, shallow=False):
            found.append(f"{name} differs from its replay")
    listed = series_.load_series(expected.parent, expected.name.removeprefix("torch-"))
    if [p.name for p in listed.patches] != again:
        found.append("its series file lists other patches than the replay")
    return found


def check(release: str, from_release: str, patches: Path = PATCHES,
          fetch: rebase.Fetch = rebase.wheel_fetch, build: Path = BUILD) -> list[str]:  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        replayed = Path(tmp) / "series"
        job = rebase.Job(
            from_release,
            release,
            patches,
            build / "series-check" / f"torch-{from_release}-to-{release}",
            replayed,
            prove=False,
            like_target=True,
        )
        if not rebase.start(job, fetch):
            return [
                "the replay stops on a conflict no recorded resolution "
                f"resolves:\n{rebase.conflicts(job)}"
            ]
        rebase.finish(job, None)
        return differences(patches / f"torch-{release}", replayed)


def main(argv: list[str]) -> int:
    chosen = set(argv)
    failed = []
    dirs = sorted(
        PATCHES.glob("torch-*"), key=lambda d: series_.version_key(d.name[6:])
    )
    for series_dir in dirs:
        release = series_dir.name.removeprefix("torch-")
        if chosen and release not in chosen:
            continue
        from_release = parent(series_dir)
        if from_release is None:
            print(f"torch-{release}: edited by hand (not derived by make rebase)")
            continue
        try:
            problems = check(release, from_release)
        except rebase.RebaseError as error:
            problems = [str(error)]
        verdict = "FAILED" if problems else "equals"
        print(f"torch-{release}: {verdict} the replay of torch-{from_release}")
        for problem in problems:
            print(f"  {problem}")
        if problems:
            failed.append(release)
    if failed:
        print(
            f"series-check: regenerate with `make rebase FROM=<parent> TO=<release>`: "
            f"{', '.join(failed)}",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
