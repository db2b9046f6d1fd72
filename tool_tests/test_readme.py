"""README's first screen runs as pasted: its reproducer, saved as a file and
run with this venv's python, prints what README shows, on the pristine and
on the patched torch of the newest release (the release README shows). It
leaves the torch as it found it, pristine or patched."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchpatch import bundle, series
from torchpatch.targets import InstalledTorch

README = Path(__file__).resolve().parents[1] / "README.md"
NEWEST = series.supported_versions(bundle.data_root() / "patches")[-1]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def blocks() -> dict[str, str]:
    """README's first python block and the two outputs after it."""
    text = README.read_text()
    found = BLOCK.findall(text[: text.index("## Supported releases")])
    (script,) = [body for lang, body in found if lang == "python"]
    outputs = [body for lang, body in found if lang == "" and "Explanation" in body]
    pristine, patched = outputs
    return {"script": script, "pristine": pristine, "patched": patched}


def torchpatch(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "torchpatch", *args], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


@pytest.mark.skipif(
    InstalledTorch.find().version != NEWEST, reason=f"README shows torch {NEWEST}"
)
def test_readme_reproducer_prints_what_readme_shows(tmp_path):
    shown = blocks()
    script = tmp_path / "repro.py"
    script.write_text(shown["script"])
    printed = {}
    found = json.loads(torchpatch("status", "--json"))["state"]
    try:
        for state, command in (("pristine", "revert"), ("patched", "apply")):
            torchpatch(command)
            printed[state] = subprocess.run(
                [sys.executable, str(script)], cwd=tmp_path,
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
    finally:
        torchpatch("revert" if found == "pristine" else "apply")
    assert printed == {"pristine": shown["pristine"], "patched": shown["patched"]}
