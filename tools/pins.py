"""requirements/torch-TO.txt from requirements/torch-FROM.txt (tools/rebase.py):
FROM's pins, but torch at TO; of what torch FROM pulls in, only TO's own
requirements that TO's metadata admits at FROM's pin, the rest left to pip.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name as canonical

from tools.plumbing import ROOT, Failed, run

# pip's resolution for CPython 3.11 into a folder (its last argument),
# installing nothing.
DRY_RUN = (
    "-m pip --disable-pip-version-check install -q --dry-run --ignore-installed"
    " --only-binary=:all: --python-version=3.11 --target"
)


def dry_run(requirements: list[str], *options: str) -> list[dict[str, Any]]:
    """The metadata of what `pip install` would install for CPython 3.11."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, *DRY_RUN.split(), tmp, "--report", str(report)]
        try:
            run(
                [*command, *options, *requirements],
                env=dict(os.environ, PIP_CONSTRAINT=os.devnull),
            )
        except Failed as error:
            last = str(error).splitlines()[-1]
            raise Failed(f"pip cannot resolve the pins: {last}") from None
        return [i["metadata"] for i in json.loads(report.read_text())["install"]]


def new_pins(from_release: str, to_release: str) -> str:
    old = (ROOT / "requirements" / f"torch-{from_release}.txt").read_text()
    pulled_in = {canonical(m["name"]) for m in dry_run([f"torch=={from_release}"])}
    (torch,) = dry_run([f"torch=={to_release}"], "--no-deps")
    needs = {}
    for requirement in map(Requirement, torch.get("requires_dist", [])):
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            needs[canonical(requirement.name)] = requirement
    wanted = [f"torch=={to_release}"]
    for name, _, version in (x.partition("==") for x in old.splitlines()):
        name, version, need = name.strip(), version.strip(), needs.get(canonical(name))
        if name.startswith("#") or not name:
            continue
        admits = need and need.specifier.contains(version, prereleases=True)
        if canonical(name) not in pulled_in or admits:
            wanted.append(f"{name}=={version}")
    pins = sorted(dry_run(wanted), key=lambda m: str(m["name"]).lower())
    return (
        f"# Pins for torch {to_release}: `make venv TORCH={to_release}` installs exactly\n"
        f"# this set into .venvs/torch-{to_release}. Written by `make rebase` from\n"
        f"# requirements/torch-{from_release}.txt: torch {to_release}, the pins of torch's\n"
        "# requirements as its metadata admits them, and the rest of the old pins.\n"
    ) + "".join(f"{m['name']}=={m['version']}\n" for m in pins)
