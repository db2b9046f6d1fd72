"""README's table of releases: a release without a new proof keeps its old
record, marked as made before its series changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tools import release_table


def record(release: str, series: str) -> dict[str, object]:
    counts = {"passed": 3, "tests": 3, "failures": 0}
    return {
        "release": release,
        "series": series,
        "era": "graph break",
        "modes": ["1"],
        "tests": ["t.py"],
        "patched": {"1": counts},
        "pristine": {"1": {"fix": {"failures": 2, "tests": 2}}},
        "proven": True,
        "date": "2026-12-01",
        "commit": "abc",
    }


def head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"],
        cwd=release_table.ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def new_record(release: str, series: str, commit: str) -> dict[str, object]:
    """A record made at commit, of the series and test file of this checkout."""
    return {
        **record(release, series),
        "commit": commit,
        "tests": ["fix_tests/test_hop_mutation.py"],
    }


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Empty records, results and README in tmp_path, in place of the real
    ones; calling it with releases makes them the ones the series serve."""
    records, results = tmp_path / "records", tmp_path / "releases.json"
    records.mkdir()
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{release_table.BEGIN}\n{release_table.END}\n")
    monkeypatch.setattr(release_table, "RECORDS", records)
    monkeypatch.setattr(release_table, "RELEASES", results)
    monkeypatch.setattr(release_table, "README", readme)

    def serve(*releases: str) -> tuple[Path, Path, Path]:
        served = dict.fromkeys(releases)
        monkeypatch.setattr(release_table, "served_releases", lambda _: served)
        return records, results, readme

    return serve


def test_a_release_without_a_new_proof_is_marked_stale(project) -> None:
    records, results, readme = project("2.14.0", "2.15.0")
    fresh = new_record("2.15.0", "2.15.0", head())
    (records / "2.15.0.json").write_text(json.dumps(fresh))
    results.write_text(json.dumps({"releases": [record("2.14.0", "2.14.1")]}))
    assert release_table.record() == 1  # 2.14.0 has no new proof
    text = readme.read_text()
    assert "| 2.15.0 | 2.15.0 | graph break | on | 3/3 (on) | 2/2 (on) | yes |" in text
    assert "| 2.14.0 | 2.14.1 |" in text
    assert "not since the series changed" in text
    assert release_table.check() == 0


def test_an_old_proof_of_an_unchanged_series_is_kept_as_it_is(project) -> None:
    # Made at this checkout's HEAD, with the series and tests as they are:
    # still a proof of them, not marked.
    _, results, readme = project("2.15.0")
    old = {**new_record("2.15.0", "2.15.0", head()), "stale": True}
    results.write_text(json.dumps({"releases": [old]}))
    assert release_table.record() == 0
    assert f"| yes | 2026-12-01 at {head()} |" in readme.read_text()


def test_a_new_record_of_a_series_since_changed_is_marked_stale(project) -> None:
    # A record an earlier run left in build/releases, made before the series
    # changed (at the first commit of this repository), is not a proof of it.
    records, _, readme = project("2.15.0")
    first = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"],
        cwd=release_table.ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()[0][:12]  # fmt: skip
    (records / "2.15.0.json").write_text(
        json.dumps(new_record("2.15.0", "2.15.0", first))
    )
    assert release_table.record() == 1
    assert "| not since the series changed |" in readme.read_text()
