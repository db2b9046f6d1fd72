"""Where the checkout keeps what the tools read and write."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"  # scratch, not committed
RESULTS = ROOT / "results"  # the records the repository carries
BENCH_RESULTS = RESULTS / "bench"
