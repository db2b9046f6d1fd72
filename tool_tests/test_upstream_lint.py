"""Upstream's lint of a series targets the oldest Python its release supports."""

from __future__ import annotations

import pytest

from tools import upstream_lint


@pytest.mark.parametrize(
    "requires, expected",
    [
        (">=3.8.0", ["--target-version", "py38"]),  # torch 2.4
        (">=3.9.0", ["--target-version", "py39"]),  # 2.5 to 2.8
        (">=3.10", []),  # upstream's own py310
        (">=3.11", []),
    ],
)
def test_lint_targets_the_releases_oldest_python(monkeypatch, requires, expected):
    monkeypatch.setattr(
        upstream_lint.metadata, "metadata", lambda name: {"Requires-Python": requires}
    )
    assert upstream_lint.target_version() == expected
