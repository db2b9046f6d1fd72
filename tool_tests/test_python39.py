"""The series of the releases that support Python 3.9 (torch 2.8 and older)
leave no annotation that Python 3.9 cannot evaluate when it defines the
function (PEP 604's `X | None`, which needs 3.10), and those of the
releases that support 3.8 (torch 2.4) none that 3.8 cannot (PEP 585's
`tuple[...]`, which needs 3.9): torch._dynamo would not import there."""

from __future__ import annotations

import re
from pathlib import Path

from torchpatch import series

PATCHES = Path(__file__).resolve().parents[1] / "patches"
NEWEST_FOR_PYTHON_39 = (2, 8)  # pip: torch for Python 3.9 ends at 2.8.0
NEWEST_FOR_PYTHON_38 = (2, 4)  # torch 2.4's Requires-Python: >=3.8.0
PEP_604_ANNOTATION = re.compile(r"(\w:|->)\s*[\w\[\], .\"]+\|\s*None")
PEP_585_ANNOTATION = re.compile(r"(\w:|->)[^=#]*\b(tuple|list|dict|set|type)\[")


def added_lines(found: series.Series) -> list[str]:
    """The lines the series leaves added: each patch's added lines, less
    those a later patch removes."""
    added: list[str] = []
    for patch in found.patches:
        for line in patch.path.read_text().splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                added.append(line[1:])
            elif line.startswith("-") and not line.startswith("---"):
                if line[1:] in added:
                    added.remove(line[1:])
    return added


def test_no_annotation_the_oldest_python_cannot_evaluate():
    offences = []
    for release, directory in series.served_releases(PATCHES).items():
        if series.version_key(release)[:2] > NEWEST_FOR_PYTHON_39:
            continue
        found = series.load_series(PATCHES, directory.name.removeprefix("torch-"))
        python_38 = series.version_key(release)[:2] <= NEWEST_FOR_PYTHON_38
        offences += [
            f"{directory.name}: {line.strip()}"
            for line in added_lines(found)
            if PEP_604_ANNOTATION.search(line)
            or (python_38 and PEP_585_ANNOTATION.search(line))
        ]
    assert sorted(set(offences)) == []
