"""PyTorch issue 126355 before and after the fix, for the torch of this venv.

Runs tools/reproducer.py (the issue's reproducer and other ways to write
the same mutation in a control_flow.map body) in each inlining mode the
release has, first on the pristine torch (`torchpatch revert`), then patched
(`torchpatch apply`), each in a fresh process so that the files Dynamo
imports are the ones on disk. Prints, for each form and mode, the exception
and what its message says, and leaves the environment patched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from typing import Any

from tools.paths import ROOT
from tools.run import torchpatch
from torchpatch.inline_mode import modes

WIDTH = 200  # characters of a message shown


def run_forms(inline: str) -> dict[str, dict[str, str]]:
    """tools.reproducer's errors, in a process with the given mode."""
    proc = subprocess.run(
        [sys.executable, "-m", "tools.reproducer", inline],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    errors: dict[str, dict[str, str]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return errors


def shown(error: dict[str, Any]) -> str:
    text = f"{error['type']}: {error['message']}"
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def main() -> int:
    found = {}
    for state, command in (("pristine", "revert"), ("patched", "apply")):
        torchpatch(command)
        for inline in modes():
            found[state, inline] = run_forms(inline)

    version = metadata.version("torch")
    print(f"PyTorch issue 126355 on torch {version}: an outer module mutated in a")
    print("control_flow.map body, fullgraph=True")
    for inline in modes():
        for form in found["pristine", inline]:
            print()
            print(f"{form}   (inlining {'on' if inline == '1' else 'off'})")
            for state in ("pristine", "patched"):
                print(f"  {state:<9}{shown(found[state, inline][form])}")
    # One exception type and one kind of message: the part before the
    # attribute and module it names.
    kinds = {
        (e["type"], e["message"].split(":")[0])
        for (state, _), errors in found.items()
        if state == "patched"
        for e in errors.values()
    }
    print()
    if len(kinds) == 1:
        print(f"patched: one error for every form and mode: {' '.join(kinds.pop())}")
        return 0
    print("patched: the forms or modes still differ")
    return 1


if __name__ == "__main__":
    sys.exit(main())
