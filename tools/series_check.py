"""Every series `make rebase` derived equals the replay of its parent, the
series its HEADER's Rebased-From names, with its recorded resolutions.

    python -m tools.series_check [RELEASE ...]   # make series-check
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tools import rebase
from tools.plumbing import BUILD, ROOT, Failed, dep3
from torchpatch import series as series_


def parent(series_dir: Path) -> str | None:
    """The parent of a series `make rebase` derived; None for one edited by hand."""
    fields = dep3((series_dir / "HEADER").read_text())
    name = (fields.get("Rebased-From", "").split() or [""])[0]
    derived = "make rebase" in fields.get("Origin", "") and name.startswith("torch-")
    return name.removeprefix("torch-") if derived else None


def check(
    release: str,
    from_release: str,
    patches: Path = ROOT / "patches",
    fetch: rebase.Fetch = rebase.wheel_fetch,
    build: Path = BUILD,
) -> list[str]:
    """How the replay differs from release's series in patches/."""
    work = build / "series-check" / f"torch-{from_release}-to-{release}"
    with tempfile.TemporaryDirectory() as replayed:
        job = rebase.Job(from_release, release, patches, work, Path(replayed))
        if not rebase.start(job, fetch):
            stop = "the replay stops on a conflict no recorded resolution resolves"
            return [f"{stop}:\n{rebase.conflicts(job)}"]
        rebase.finish(job)
        names = [p.name for p in series_.load_series(patches, release).patches]
        again = sorted(p.name for p in Path(replayed).glob("*.patch"))
        found = [] if names == again else [f"patches {names} != replayed {again}"]
        for name in sorted(set(names) & set(again)):
            if (job.target / name).read_bytes() != (Path(replayed) / name).read_bytes():
                found.append(f"{name} differs from its replay")
        return found


def main(argv: list[str]) -> int:
    failed = []
    names = [d.name.removeprefix("torch-") for d in (ROOT / "patches").glob("torch-*")]
    for release in sorted(names, key=series_.version_key):
        if argv and release not in argv:
            continue
        if (from_release := parent(ROOT / "patches" / f"torch-{release}")) is None:
            print(f"torch-{release}: edited by hand (not derived by make rebase)")
            continue
        try:
            problems = check(release, from_release)
        except Failed as error:
            problems = [str(error)]
        verdict = "FAILED" if problems else "equals"
        print(f"torch-{release}: {verdict} the replay of torch-{from_release}")
        print("".join(f"  {problem}\n" for problem in problems), end="")
        failed += [release] if problems else []
    if failed:
        regenerate = "regenerate with `make rebase FROM=<parent> TO=<release>`"
        print(f"series-check: {regenerate}: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
