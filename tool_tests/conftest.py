from __future__ import annotations

from pathlib import Path

import fakes
import pytest

from torchpatch.cli import main


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    return fakes.make_upstream(tmp_path / "upstream")


@pytest.fixture
def data(tmp_path: Path, upstream: Path) -> Path:
    return fakes.make_data(tmp_path / "project", upstream)


@pytest.fixture
def install(tmp_path: Path) -> fakes.FakeInstall:
    return fakes.make_install(tmp_path / "site-packages")


@pytest.fixture
def source_tree(tmp_path: Path, upstream: Path) -> Path:
    """A checkout of the pristine upstream tree."""
    tree = tmp_path / "pytorch"
    fakes.git(tmp_path, "clone", "-q", str(upstream), str(tree))
    fakes.git(tree, "checkout", "-q", "HEAD~2")
    return tree


@pytest.fixture
def run(data: Path, install: fakes.FakeInstall, capsys):
    """torchpatch on the fake install: (exit code, stdout, stderr)."""

    def run(*args: str, target: tuple[str, ...] | None = None):
        if target is None:
            target = ("--site-packages", str(install.site_packages))
        code = main(["--data", str(data), *args, *(target or ())])
        out, err = capsys.readouterr()
        return code, out, err

    return run
