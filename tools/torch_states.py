"""A pristine and a patched torch side by side, from one virtualenv.

Each state is a copy of the virtualenv whose files are hard links to the
original's, with the series reverted or applied by torchpatch. torchpatch
writes new files and renames them into place, so patching one copy never
writes through a link into the other or into the original; the copies cost
no disk space and can run at the same time, one per core.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tools.run import torchpatch

STATES = {"pristine": "revert", "patched": "apply"}


@contextmanager
def torch_states(venv: Path, work: Path) -> Iterator[dict[str, Path]]:
    """{state: python} for the states of venv's torch; removed on exit."""
    pythons: dict[str, Path] = {}
    try:
        for state, command in STATES.items():
            copy = work / f"venv-{state}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(venv, copy, symlinks=True, copy_function=os.link)
            pythons[state] = copy / "bin" / "python"
            torchpatch(command, python=pythons[state])
        yield pythons
    finally:
        for state in STATES:
            shutil.rmtree(work / f"venv-{state}", ignore_errors=True)
