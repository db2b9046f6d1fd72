"""Keep the test file a series' test commit creates equal to this project's copy.

The pull request's commit of the helper (2.15.0's 0002) creates
test/dynamo/test_hop_mutation.py, so that `git am` of the series gives a
reviewer the whole pull request; the file's source is the `FILE` of the
series' `tests` line `FILE -> test/dynamo/test_hop_mutation.py`.

    python -m tools.carried_tests           # rewrite stale copies in place
    python -m tools.carried_tests --check   # fail if one is stale (make lint)
"""

from __future__ import annotations

import sys

from tools.paths import ROOT
from torchpatch import export, series


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        raise SystemExit("usage: python -m tools.carried_tests [--check]")
    problems = []
    for version in series.supported_versions(ROOT / "patches"):
        found = series.load_series(ROOT / "patches", version)
        if found.version != version:
            continue  # a series serving several releases: once, at its own
        if check:
            problems += export.stale_carried(found, ROOT)
        else:
            for path in export.refresh_carried(found, ROOT):
                print(f"rewrote {path.relative_to(ROOT)}")
    for problem in problems:
        print(f"carried tests: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
