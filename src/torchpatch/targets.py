"""Where a series is applied: an installed torch wheel or a PyTorch checkout.

An installed wheel only holds the `torch/` package, and its RECORD tells
what every pristine file hashes to. A source checkout holds every path the
series touches (tests included) but has no record of its pristine state.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from torchpatch.errors import NotASourceTree, TorchNotFound


@dataclass(frozen=True)
class InstalledTorch:
    """The torch distribution found on a sys.path (the running one by default)."""

    root: Path  # the site-packages directory that holds torch/
    version: str  # without a local part: 2.4.1+cpu patches like 2.4.1
    full_version: str
    record: dict[str, metadata.FileHash] = field(repr=False)
    wheel_tag: str = "py3-none-any"  # the WHEEL file's first Tag

    kind = "installed torch"

    @classmethod
    def find(cls, site_packages: Path | None = None) -> InstalledTorch:
        path = [str(site_packages)] if site_packages else sys.path
        dist = next(iter(metadata.distributions(name="torch", path=path)), None)
        where = site_packages or f"the sys.path of {sys.executable}"
        if dist is None:
            raise TorchNotFound(f"torch is not installed in {where}")
        files = dist.files
        if files is None:
            raise TorchNotFound(
                f"torch {dist.version} in {where} has no RECORD file, so its files "
                "cannot be verified; reinstall it with pip"
            )
        tags = re.findall(r"^Tag: (\S+)$", dist.read_text("WHEEL") or "", re.M)
        return cls(
            root=Path(str(dist.locate_file(""))).resolve(),
            version=dist.version.split("+")[0],
            full_version=dist.version,
            record={f.as_posix(): f.hash for f in files if f.hash is not None},
            **({"wheel_tag": tags[0]} if tags else {}),
        )

    def includes(self, relpath: str) -> bool:
        return relpath.startswith("torch/")

    def matches_record(self, relpath: str, data: bytes | None) -> bool | None:
        """Whether data is the wheel's file (None: absent); None if unknowable."""
        expected = self.record.get(relpath)
        if expected is None:
            return data is None
        if data is None:
            return False
        digest = hashlib.new(expected.mode, data).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == expected.value

    @property
    def python(self) -> str:
        """The interpreter of the environment that holds this torch: its
        venv's bin/python, this one if it is that environment's."""
        for folder in self.root.parents:
            if (folder / "pyvenv.cfg").is_file():
                for name in ("bin/python", "Scripts/python.exe"):
                    if (folder / name).exists():
                        return str(folder / name)
        if Path(sys.prefix).resolve() in self.root.parents:
            return sys.executable
        return f"<the python of {self.root}>"

    @property
    def reinstall_command(self) -> str:
        """How to reinstall this torch: from its index, or offline from a
        wheel of the same build (found in the working folder or in
        PIP_FIND_LINKS, else named for the user to copy there)."""
        _, _, local = self.full_version.partition("+")
        # A local version (+cpu, +cu124) is a build of PyTorch's own index,
        # which PyPI does not serve.
        index = (
            f" --index-url https://download.pytorch.org/whl/{local}" if local else ""
        )
        install = f"{self.python} -m pip install --force-reinstall --no-deps"
        name = f"torch-{self.full_version}-{self.wheel_tag}.whl"
        folders = [Path.cwd(), *map(Path, os.environ.get("PIP_FIND_LINKS", "").split())]
        wheel = next((f / name for f in folders if (f / name).is_file()), None)
        offline = (
            f"or offline: {install} --no-index {wheel}"
            if wheel
            else f"or offline, with that wheel ({name}) in this folder: "
            f"{install} --no-index ./{name}"
        )
        return f"{install} torch=={self.full_version}{index}; {offline}"

    @property
    def description(self) -> str:
        return f"torch {self.full_version} at {self.root}"


@dataclass(frozen=True)
class SourceTree:
    """A PyTorch source checkout; the version comes from its version.txt."""

    root: Path
    version: str

    kind = "source tree"

    @classmethod
    def open(cls, root: Path, version: str | None = None) -> SourceTree:
        root = root.resolve()
        version_file = root / "version.txt"
        if not (root / "torch").is_dir():
            raise NotASourceTree(f"{root} is not a PyTorch source tree (no torch/)")
        if version is None:
            if not version_file.is_file():
                raise NotASourceTree(
                    f"{root} has no version.txt; pass --torch-version to say which "
                    "release it is"
                )
            found = re.match(r"\d+\.\d+\.\d+", version_file.read_text().strip())
            if not found:
                raise NotASourceTree(
                    f"{version_file} does not start with a version; pass --torch-version"
                )
            version = found.group(0)
        return cls(root=root, version=version)

    def includes(self, relpath: str) -> bool:
        return True

    def matches_record(self, relpath: str, data: bytes | None) -> bool | None:
        return None

    @property
    def reinstall_command(self) -> str:
        return f"git -C {self.root} checkout -- <file>"

    @property
    def description(self) -> str:
        return f"PyTorch {self.version} source tree at {self.root}"
