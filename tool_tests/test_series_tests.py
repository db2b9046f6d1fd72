"""tools/series_tests.py: a series' tests file, and its export with the tests."""

from __future__ import annotations

import fakes
import pytest
from fakes import (
    EXTENDED_TEST,
    NEW_TEST,
    NEW_TEST_SOURCE,
    NEW_TEST_TEXT,
    UNLISTED_TEST,
    carry_the_test,
)

from tools import series_tests
from torchpatch import series
from torchpatch.errors import MalformedSeries


def load(data):
    return series.load_series(data / "patches", "2.4.1")


def test_the_export_adds_only_the_tests_the_series_lists(data, source_tree):
    text = series_tests.with_tests(load(data), data)
    assert f" create mode 100644 {NEW_TEST}" in text.decode()
    for absent in (UNLISTED_TEST, EXTENDED_TEST, "fix_tests/"):
        assert absent not in text.decode()
    out = source_tree.parent / "with-tests.patch"
    out.write_bytes(text)
    fakes.git(source_tree, "apply", str(out))
    assert (source_tree / NEW_TEST).read_bytes() == NEW_TEST_TEXT
    (data / "patches/torch-2.4.1/tests").unlink()
    assert NEW_TEST not in series_tests.with_tests(load(data), data).decode()


def test_a_stale_carried_test_file_is_refused_then_refreshed(
    upstream, data, source_tree
):
    test_commit = carry_the_test(upstream, data)
    changed = b"def test_new():\n    assert 1 + 1 == 2\n"
    (data / NEW_TEST_SOURCE).write_bytes(changed)
    with pytest.raises(MalformedSeries, match=f"^{test_commit} creates {NEW_TEST} "):
        series_tests.with_tests(load(data), data)
    assert series_tests.refresh(load(data), data) == [test_commit]
    assert series_tests.refresh(load(data), data) == []  # now in sync: a no-op
    fakes.git(source_tree, "checkout", "-q", "-b", "pr")
    for patch in load(data).patches:
        fakes.git(source_tree, "am", "-q", "--keep-non-patch", str(patch.path))
    assert (source_tree / NEW_TEST).read_bytes() == changed
    assert (
        series_tests.with_tests(load(data), data).count(
            b"diff --git a/" + NEW_TEST.encode()
        )
        == 1
    )


def test_a_carried_test_file_that_a_later_commit_extends(upstream, data, source_tree):
    # One commit creates the test file, the next adds a test to it: the
    # series leaves the second text, which FILE must equal.
    extended = NEW_TEST_TEXT + b"\n\ndef test_more():\n    assert 2 + 2 == 4\n"
    carry_the_test(upstream, data, extended)
    (data / NEW_TEST_SOURCE).write_bytes(NEW_TEST_TEXT)  # the first text only
    with pytest.raises(MalformedSeries, match=f"creates {NEW_TEST} unlike"):
        series_tests.with_tests(load(data), data)
    with pytest.raises(MalformedSeries, match="written by several patches"):
        series_tests.refresh(load(data), data)
    (data / NEW_TEST_SOURCE).write_bytes(extended)
    text = series_tests.with_tests(load(data), data)
    assert text.count(f"diff --git a/{NEW_TEST} ".encode()) == 2
    out = source_tree.parent / "with-tests.patch"
    out.write_bytes(text)
    fakes.git(source_tree, "apply", str(out))
    assert (source_tree / NEW_TEST).read_bytes() == extended


def test_a_helper_module_is_exported_and_not_run(data):
    # A listed file not named test_*.py is a module the test files import:
    # the pull request adds it with them, and it is not run as a test.
    (data / "fix_tests/this_era/_helpers.py").write_bytes(b"HELPER = 1\n")
    tests_file = data / "patches/torch-2.4.1/tests"
    tests_file.write_text(
        "fix_tests/this_era/_helpers.py -> test/dynamo/_helpers.py\n"
        f"{tests_file.read_text()}"
    )
    listed = series_tests.tests(load(data), data)
    assert [t.path for t in listed if t.runs] == [NEW_TEST_SOURCE, EXTENDED_TEST]
    text = series_tests.with_tests(load(data), data).decode()
    assert " create mode 100644 test/dynamo/_helpers.py" in text
    assert "+HELPER = 1" in text


@pytest.mark.parametrize(
    "tests_text, message",
    [
        ("fix_tests/test_missing.py\n", "'fix_tests/test_missing.py' does not exist"),
        ("torch/_dynamo/side_effects.py\n", "must be a path under fix_tests/"),
        ("test/dynamo/test_x.py\n", "must be a path under fix_tests/"),
        ("fix_tests/../patches/x.py\n", "must be a path under fix_tests/"),
        ("/abs/test.py\n", "must be a path under fix_tests/"),
        ("{new}\n{new}\n", "is listed twice"),
        ("{new} -> \n", "names no upstream path"),
        ("{new} -> torch/x.py\n", "must be a path under test/"),
        ("{new} -> test/a.py\n{ext} -> test/a.py\n", "is exported twice"),
    ],
)
def test_malformed_tests_file(data, tests_text, message):
    tests_file = data / "patches/torch-2.4.1/tests"
    tests_file.write_text(tests_text.format(new=NEW_TEST_SOURCE, ext=EXTENDED_TEST))
    with pytest.raises(MalformedSeries, match=f"^{tests_file}:") as raised:
        series_tests.tests(load(data), data)
    assert message in str(raised.value)
