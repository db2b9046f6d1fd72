"""Every series applies to the wheel of every release it serves.

    python -m tools.apply_check 2.4.0 2.4.1 ...    # `make apply-check`

Runs `torchpatch apply`, `apply` again (a no-op) and `revert` (back to
RECORD) on the files of each release's wheel that torchpatch reads and writes
(torch/_dynamo/, METADATA and RECORD), in a site-packages of their own: the
series' text against the release's sources, with no torch installed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tools.plumbing import Failed, torchpatch, wheel_files


def wanted(name: str) -> bool:
    top, _, rest = name.partition("/")
    return name.startswith("torch/_dynamo/") or (
        top.endswith(".dist-info") and rest in ("METADATA", "RECORD")
    )


def check(release: str) -> str | None:
    """None if the series applies, reapplies as a no-op and reverts to RECORD."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wheel_files(release, wanted, Path(tmp))
            said = [
                torchpatch(c, "--site-packages", tmp)
                for c in ("apply", "apply", "revert")
            ]
    except (Failed, ValueError) as error:
        return str(error)
    if not said[0].startswith("applied") or "already applied" not in said[1]:
        return f"unexpected output:\n{said[0]}{said[1]}"
    if "match the wheel's RECORD" not in said[2]:
        return f"revert did not restore RECORD:\n{said[2]}"
    return None


def main(releases: list[str]) -> int:
    if not releases:
        raise SystemExit("usage: python -m tools.apply_check RELEASE [RELEASE...]")
    failed = []
    for release in releases:
        problem = check(release)
        verdict = f"FAILED: {problem}" if problem else "applies, reverts to RECORD"
        print(f"torch {release}: {verdict}")
        failed += [release] if problem else []
    if failed:
        print(f"apply-check: failed for {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
