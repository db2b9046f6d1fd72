"""No file of this repository is a copy of a PyTorch file (`make lint`): a
recorded resolution under patches/*/rerere/ is a diff, and no tracked file
holds WINDOW lines of a PyTorch file under ../shared/upstream.

    python -m tools.no_copies
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from tools.plumbing import ROOT, UPSTREAM, run

WINDOW = 40  # lines, blank ones left out


def windows(path: Path) -> Iterator[tuple[int, int]]:
    """(first line number, hash of the WINDOW non-blank stripped lines) of path."""
    text = path.read_text(errors="replace").splitlines()
    lines = [(n, line.strip()) for n, line in enumerate(text, 1) if line.strip()]
    for i in range(len(lines) - WINDOW + 1):
        yield lines[i][0], hash(tuple(line for _, line in lines[i : i + WINDOW]))


def problems(root: Path = ROOT, upstream: Path = UPSTREAM) -> list[str]:
    found = [
        f"{image.relative_to(root)}: not a diff"
        for image in sorted(root.glob("patches/*/rerere/**/*"))
        if image.is_file()
        and not (image.suffix == ".diff" and image.read_text().startswith("--- a/"))
    ]
    seen: dict[int, Path] = {}
    for path in sorted(upstream.rglob("*.py")):
        for _, window in windows(path):
            seen.setdefault(window, path)
    for name in run(["git", "ls-files", "-z"], cwd=root).split("\0"):
        for n, window in windows(root / name) if (root / name).is_file() else ():
            if window in seen:
                where = seen[window].relative_to(upstream)
                found.append(f"{name}:{n}: {WINDOW} lines of {where}")
                break
    return found


if __name__ == "__main__":
    found = problems()
    for problem in found:
        print(f"no-copies: {problem}", file=sys.stderr)
    sys.exit(1 if found else 0)
