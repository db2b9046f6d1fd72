"""README's first screen runs as pasted: its reproducer, saved as a file and
run with the python of a pristine and of a patched copy of this venv,
prints what README shows, on the newest release (the release README
shows)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tools.plumbing import venv_states
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


@pytest.mark.skipif(
    InstalledTorch.find().version != NEWEST, reason=f"README shows torch {NEWEST}"
)
def test_readme_reproducer_prints_what_readme_shows(tmp_path):
    shown = blocks()
    script = tmp_path / "repro.py"
    script.write_text(shown["script"])
    with venv_states(tmp_path) as pythons:
        printed = {
            state: subprocess.run([python, str(script)], cwd=tmp_path,
                                  capture_output=True, text=True, check=True).stdout
            for state, python in pythons.items()
        }  # fmt: skip
    assert printed == {"pristine": shown["pristine"], "patched": shown["patched"]}
