"""Every series applies to the wheel of every release it serves.

    python -m tools.apply_check 2.4.0 2.4.1 ...    # `make apply-check`

For each release, takes its torch wheel from pip's cache (or PyPI) with
`pip download --no-deps`, unpacks only what torchpatch reads and writes
(torch/_dynamo/ and the wheel's METADATA and RECORD) into a site-packages of
its own, and there runs `torchpatch apply`, a second `apply` (a no-op) and
`revert`, which must leave every file as RECORD has it. No torch is
installed or imported: this checks the series' text against the release's
sources in seconds, where proving a release (`make test TORCH=<release>`)
takes a 5 GB venv.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tools.plumbing import Failed, torchpatch, wheel_files


def wanted(name: str) -> bool:
    """What torchpatch reads and writes: torch/_dynamo/, METADATA and RECORD."""
    dist_info = name.split("/")[0].endswith(".dist-info")
    return name.startswith("torch/_dynamo/") or (
        dist_info and name.endswith(("/METADATA", "/RECORD"))
    )


def check(release: str, work: Path) -> str | None:
    """None if the series applies, reapplies as a no-op and reverts to RECORD."""
    site_packages = work / "site-packages"
    try:
        wheel_files(release, wanted, site_packages)
        target = ("--site-packages", str(site_packages))
        applied = torchpatch("apply", *target)
        again = torchpatch("apply", *target)
        reverted = torchpatch("revert", *target)
    except (Failed, ValueError) as error:
        return str(error)
    if not applied.startswith("applied") or "already applied" not in again:
        return f"unexpected output:\n{applied}{again}"
    if "match the wheel's RECORD" not in reverted:
        return f"revert did not restore RECORD:\n{reverted}"
    return None


def main(releases: list[str]) -> int:
    failed = []
    for release in releases:
        with tempfile.TemporaryDirectory() as tmp:
            problem = check(release, Path(tmp))
        print(f"torch {release}: " + ("applies, reverts to RECORD" if not problem
                                      else f"FAILED: {problem}"))  # fmt: skip
        if problem:
            failed.append(release)
    if failed:
        print(f"apply-check: failed for {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m tools.apply_check RELEASE [RELEASE...]")
    sys.exit(main(sys.argv[1:]))
