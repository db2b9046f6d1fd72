"""tools/pins.py: a new release's pins from its parent's, with pip's resolver
faked (no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tools import pins

OLD_PINS = """\
# Pins for torch 2.14.1
filelock==3.0
nvidia-x==12.0
optree==0.13.0
pytest==8.0
sympy==1.13.3
torch==2.14.1
"""
# What torch 2.15.0's metadata requires: nvidia-x at another version, and an
# extra's requirement that a plain install does not pull in.
REQUIRES = ["filelock", "nvidia-x==13.0; python_version >= '3'", "sympy>=1.13.3"]
REQUIRES += ["optree; extra == 'opt'"]


def metadata(*pins: str) -> list[dict[str, Any]]:
    return [dict(zip(("name", "version"), pin.split("=="))) for pin in pins]


@pytest.fixture
def resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The requirements of each resolution pins asks pip's resolver for."""
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "torch-2.14.1.txt").write_text(OLD_PINS)
    monkeypatch.setattr(pins, "ROOT", tmp_path)
    asked: list[list[str]] = []

    def dry_run(requirements: list[str], *options: str) -> list[dict[str, Any]]:
        asked.append(requirements)
        if requirements == ["torch==2.14.1"]:  # what the old torch pulls in
            pulled_in = ["filelock==3.0", "nvidia-x==12.0", "optree==0.13.0"]
            return metadata("torch==2.14.1", *pulled_in, "sympy==1.13.3")
        if options == ("--no-deps",):
            return [{"name": "torch", "version": "2.15.0", "requires_dist": REQUIRES}]
        return metadata(*requirements, "nvidia-x==13.0")  # pip resolves the rest

    monkeypatch.setattr(pins, "dry_run", dry_run)
    return asked


def test_torch_moves_and_its_changed_requirement_is_left_to_pip(
    resolved: list[list[str]],
) -> None:
    text = pins.new_pins("2.14.1", "2.15.0")
    # Kept: what 2.15.0 requires and admits at the old pin (filelock, sympy),
    # and what torch does not pull in (pytest). Left to pip: nvidia-x, which
    # 2.15.0 wants at 13.0, and optree, which only an extra of 2.15.0 requires.
    assert resolved[-1] == [
        "torch==2.15.0",
        "filelock==3.0",
        "pytest==8.0",
        "sympy==1.13.3",
    ]
    assert text.splitlines()[-5:] == [
        "filelock==3.0",
        "nvidia-x==13.0",
        "pytest==8.0",
        "sympy==1.13.3",
        "torch==2.15.0",
    ]
    assert text.startswith("# Pins for torch 2.15.0: `make venv TORCH=2.15.0`")
