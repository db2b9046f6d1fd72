"""The series of the releases that support Python 3.9 (torch 2.8 and older)
leave no annotation that Python 3.9 cannot evaluate when it defines the
function (PEP 604's `X | None`, which needs 3.10): torch._dynamo would not
import there."""

from __future__ import annotations

import re
from pathlib import Path

from torchpatch import series

PATCHES = Path(__file__).resolve().parents[1] / "patches"
NEWEST_FOR_PYTHON_39 = (2, 8)  # pip: torch for Python 3.9 ends at 2.8.0
PEP_604_ANNOTATION = re.compile(r"(\w:|->)\s*[\w\[\], .\"]+\|\s*None")


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


def test_no_pep_604_annotation_for_python_39():
    offences = []
    for release, directory in series.served_releases(PATCHES).items():
        if series.version_key(release)[:2] > NEWEST_FOR_PYTHON_39:
            continue
        found = series.load_series(PATCHES, directory.name.removeprefix("torch-"))
        offences += [
            f"{directory.name}: {line.strip()}"
            for line in added_lines(found)
            if PEP_604_ANNOTATION.search(line)
        ]
    assert sorted(set(offences)) == []
