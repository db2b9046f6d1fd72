"""A series serves the releases its `releases` file lists, and no other."""

from __future__ import annotations

import pytest

from torchpatch import series
from torchpatch.errors import MalformedSeries, UnsupportedVersion


def make_series(root, version, releases=None):
    directory = root / f"torch-{version}"
    directory.mkdir()
    (directory / "series").write_text("")
    if releases is not None:
        (directory / "releases").write_text(releases)
    return directory


def test_a_series_serves_the_releases_it_lists(tmp_path):
    old = make_series(tmp_path, "2.4.1", "# proven on\n2.4.0\n2.4.1\n")
    new = make_series(tmp_path, "2.15.0", "2.14.0\n2.15.0\n")
    make_series(tmp_path, "2.6.0")
    assert series.served_releases(tmp_path) == {
        "2.4.0": old,
        "2.4.1": old,
        "2.6.0": tmp_path / "torch-2.6.0",
        "2.14.0": new,
        "2.15.0": new,
    }
    found = series.load_series(tmp_path, "2.14.0")
    assert (found.version, found.directory, found.releases) == (
        "2.15.0",
        new,
        ("2.14.0", "2.15.0"),
    )


@pytest.mark.parametrize("release", ["2.3.1", "2.14.1", "2.16.0.dev20261201"])
def test_a_release_no_series_lists_is_refused(tmp_path, release):
    make_series(tmp_path, "2.4.1", "2.4.0\n2.4.1\n")
    make_series(tmp_path, "2.15.0", "2.14.0\n2.15.0\n")
    with pytest.raises(UnsupportedVersion) as refused:
        series.load_series(tmp_path, release)
    assert str(refused.value) == (
        f"no patch series for torch {release}; "
        "supported versions: 2.4.0 to 2.15.0 (4 releases: 2.4.0, 2.4.1, 2.14.0, "
        "2.15.0)"
    )


@pytest.mark.parametrize(
    "releases, message",
    [
        ("2.4\n", "'2.4' is not a release like 2.4.1"),
        ("2.4.0\n2.4.0\n", "'2.4.0' is listed twice"),
        ("# nothing\n", "lists no release"),
    ],
)
def test_malformed_releases_file(tmp_path, releases, message):
    make_series(tmp_path, "2.4.1", releases)
    with pytest.raises(MalformedSeries, match=message):
        series.supported_versions(tmp_path)


def test_a_release_served_twice_is_refused(tmp_path):
    make_series(tmp_path, "2.4.1", "2.4.0\n2.4.1\n")
    make_series(tmp_path, "2.4.0")
    with pytest.raises(MalformedSeries, match="torch 2.4.0 is served by both"):
        series.supported_versions(tmp_path)


def test_releases_are_listed_in_release_order(tmp_path):
    for version in ("2.13.0", "2.4.1", "2.15.0", "2.6.0"):
        make_series(tmp_path, version)
    assert series.supported_versions(tmp_path) == ["2.4.1", "2.6.0", "2.13.0", "2.15.0"]
