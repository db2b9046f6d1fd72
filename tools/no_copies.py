"""No file of this repository is a copy of a PyTorch file (`make lint`).

Two rules: a recorded resolution under patches/*/rerere/ is a pair of small
diffs (tools/rebase.py writes `preimage.diff` and `postimage.diff`), never
the conflicted or resolved file itself; and no file that git tracks here
holds a run of WINDOW lines of a PyTorch file under ../shared/upstream
(main's tests and the releases' test trees), so the tests point at
PyTorch's files instead of copying them.

    python -m tools.no_copies
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tools.plumbing import ROOT, UPSTREAM

WINDOW = 40  # lines, blank ones left out


def windows(text: str) -> Iterator[tuple[int, tuple[str, ...]]]:
    """(first line number, WINDOW non-blank stripped lines) of text."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line]
    for i in range(len(lines) - WINDOW + 1):
        yield lines[i][0], tuple(line for _, line in lines[i : i + WINDOW])


def problems(root: Path = ROOT, upstream: Path = UPSTREAM) -> list[str]:
    found = []
    for image in sorted(root.glob("patches/*/rerere/**/*")):
        if image.is_file() and not (
            image.suffix == ".diff" and image.read_text().startswith("--- a/")
        ):
            found.append(f"{image.relative_to(root)}: not a diff")
    seen: dict[int, Path] = {}
    for path in sorted(upstream.rglob("*.py")):
        for _, window in windows(path.read_text(errors="replace")):
            seen.setdefault(hash(window), path)
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if not (root / name).is_file():
            continue
        for line, window in windows((root / name).read_text(errors="replace")):
            if hash(window) in seen:
                copied = seen[hash(window)].relative_to(upstream)
                found.append(f"{name}:{line}: {WINDOW} lines of {copied}")
                break
    return found


def main() -> int:
    found = problems()
    for problem in found:
        print(f"no-copies: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
