"""Where this project's patches/ directory is.

A wheel built from this repository carries it as package data under
torchpatch/_data; an editable install reads it from the checkout.
"""

from __future__ import annotations

from pathlib import Path

from torchpatch.errors import TorchPatchError


def data_root() -> Path:
    package = Path(__file__).resolve().parent
    for candidate in (package / "_data", package.parents[1]):
        if (candidate / "patches").is_dir():
            return candidate
    raise TorchPatchError(
        f"cannot find the patch series next to {package}; reinstall torchpatch"
    )
