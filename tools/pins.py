"""requirements/torch-TO.txt from requirements/torch-FROM.txt, for tools/rebase.py.

FROM's pins are kept, but for torch and what torch FROM pulls in: torch is
pinned at TO, each of TO's own requirements keeps FROM's pin where TO's
metadata admits it, and the rest of torch's dependencies (the CUDA
libraries an `==` of TO's requires, say) are left to pip's resolver. Two
dry runs of pip, which read metadata and download no wheel, give what
torch FROM pulls in and the exact versions of the new set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

from tools.plumbing import ROOT

PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check")


class PinError(Exception):
    pass


def read_pins(requirements: Path) -> tuple[list[str], dict[str, str]]:
    """(the comment lines, {name: version}) of a file of exact pins."""
    comments, pins = [], {}
    for line in requirements.read_text().splitlines():
        if line.startswith("#"):
            comments.append(line)
        elif line.strip():
            name, _, version = line.partition("==")
            pins[name.strip()] = version.strip()
    return comments, pins


def dry_run(requirements: list[str], *options: str) -> list[dict[str, Any]]:
    """What `pip install` would install for requirements, from metadata only."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "requirements.txt"
        listing.write_text("\n".join(requirements) + "\n")
        report = Path(tmp) / "report.json"
        proc = subprocess.run(
            [*PIP, "install", "-q", "--dry-run", "--ignore-installed",
             "--only-binary=:all:", "--python-version=3.11", "--target", tmp,
             "--report", str(report), *options, "-r", str(listing)],
            env=dict(os.environ, PIP_CONSTRAINT=os.devnull),
            capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise PinError(f"pip cannot resolve the pins: {last}")
        installs: list[dict[str, Any]] = json.loads(report.read_text())["install"]
        return installs


def torch_requirements(release: str) -> list[Requirement]:
    (torch,) = dry_run([f"torch=={release}"], "--no-deps")
    needs = [Requirement(text) for text in torch["metadata"].get("requires_dist", [])]
    return [r for r in needs if r.marker is None or r.marker.evaluate({"extra": ""})]


def new_pins(from_release: str, to_release: str) -> str:
    _, pins = read_pins(ROOT / "requirements" / f"torch-{from_release}.txt")
    pulled_in = {
        canonicalize_name(i["metadata"]["name"])
        for i in dry_run([f"torch=={from_release}"])
    }
    needs = {canonicalize_name(r.name): r for r in torch_requirements(to_release)}
    wanted = [f"torch=={to_release}"]
    for name, version in pins.items():
        key = canonicalize_name(name)
        need = needs.get(key)
        if key not in pulled_in:
            wanted.append(f"{name}=={version}")
        elif need is not None and need.specifier.contains(version, prereleases=True):
            wanted.append(f"{name}=={version}")
    resolved = {
        i["metadata"]["name"]: i["metadata"]["version"] for i in dry_run(wanted)
    }
    header = [
        f"# Pins for torch {to_release}: `make venv TORCH={to_release}` installs exactly",
        f"# this set into .venvs/torch-{to_release}. Written by `make rebase` from",
        f"# requirements/torch-{from_release}.txt: torch {to_release}, the pins of torch's",
        "# requirements as its metadata admits them, and the rest of the old pins.",
    ]
    lines = [f"{name}=={resolved[name]}" for name in sorted(resolved, key=str.lower)]
    return "\n".join(header + lines) + "\n"


def resolve_pins(job: Any) -> str:
    return new_pins(job.from_release, job.to_release)
