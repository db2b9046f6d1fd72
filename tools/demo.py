"""The seed scenario of PyTorch issue 126355, before and after the fix.

Runs the reproducer with inlining off and on, first on the pristine torch of
this interpreter (`torchpatch revert`), then patched (`torchpatch apply`),
each in a fresh process so that the files Dynamo imports are the ones on
disk. Prints the exception type and first message line of each run and
leaves the environment patched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPRODUCER = Path(__file__).resolve().parent / "issue_126355.py"


def run_scenario(inline: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(REPRODUCER), inline],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    rows = []
    for torch_state, command in (("pristine", "revert"), ("patched", "apply")):
        subprocess.run(
            [sys.executable, "-m", "torchpatch", command],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for inline, label in (("0", "off"), ("1", "on")):
            result = run_scenario(inline)
            rows.append((torch_state, label, result["type"], result["message"]))

    print("PyTorch issue 126355: `self.w += 1` inside control_flow.map, fullgraph=True")
    print()
    header = (
        f"torch {metadata.version('torch')}",
        "inlining",
        "exception",
        "message (first line)",
    )
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(3)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])
    patched = [r for r in rows if r[0] == "patched"]
    same = len({(r[2], r[3]) for r in patched}) == 1
    print()
    print(
        "patched: the same error in both modes"
        if same
        else "patched: the modes still differ"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
