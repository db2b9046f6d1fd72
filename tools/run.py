"""How the tools run torchpatch and pytest: each in a process of its own, so
that what Dynamo imports is the torch on disk."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tools.paths import ROOT

# pytest as the tools run it: quiet, and leaving nothing in the checkout.
PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:logging")


class TorchpatchFailed(RuntimeError):
    """torchpatch refused or failed; the message is its error line."""


def torchpatch(*args: str | Path, python: str | Path = sys.executable) -> str:
    """`python -m torchpatch args` with python (this one by default): its
    output; its error line as TorchpatchFailed if it fails."""
    proc = subprocess.run(
        [str(python), "-m", "torchpatch", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        command = " ".join(["torchpatch", *map(str, args)])
        raise TorchpatchFailed(f"{command}: {proc.stderr.strip()}")
    return proc.stdout


def pytest_command(*args: str | Path, python: str | Path = sys.executable) -> list[str]:
    """The command line of pytest on args, as the tools run it."""
    return [str(python), *PYTEST, *map(str, args)]


def pytest(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    python: str | Path = sys.executable,
) -> int:
    """pytest on args, its output discarded (ask for a --junitxml report):
    its exit code."""
    return subprocess.run(
        pytest_command(*args, python=python),
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        check=False,
    ).returncode
