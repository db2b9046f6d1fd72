"""export: one upstream patch that git apply and git am both take."""

from __future__ import annotations

import subprocess

import fakes
import pytest
from fakes import (
    EXTENDED_TEST,
    NEW_TEST,
    NEW_TEST_SOURCE,
    NEW_TEST_TEXT,
    PATCHED,
    UNLISTED_TEST,
)


def test_export_applies_with_git_apply_and_git_am(run, source_tree, tmp_path):
    out = tmp_path / "upstream.patch"
    code, stdout, _ = run("export", str(out))
    assert code == 0
    assert stdout.startswith(f"wrote {out}")
    text = out.read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [PATCH] [dynamo] First change" in text
    assert "[dynamo] Second change\n\nWhy it is needed." in text
    assert f" create mode 100644 {NEW_TEST}" in text
    # One section per patch (side_effects.py twice), then the new test file.
    assert text.count("\ndiff --git ") == 5

    fakes.git(source_tree, "apply", "--check", str(out))
    fakes.git(source_tree, "checkout", "-q", "-b", "pr")
    fakes.git(source_tree, "am", "-q", "--keep-non-patch", str(out))
    subject = fakes.git(source_tree, "log", "-1", "--format=%s")
    assert subject.strip() == "[dynamo] First change"
    for path, data in PATCHED.items():
        assert (source_tree / path).read_bytes() == data, path
    assert (source_tree / NEW_TEST).read_bytes() == NEW_TEST_TEXT
    assert fakes.git(source_tree, "status", "--porcelain") == ""


def test_export_adds_only_the_tests_the_series_lists(run, data, tmp_path):
    out = tmp_path / "upstream.patch"
    code, stdout, _ = run("export", str(out))
    assert code == 0
    assert stdout.strip().endswith(f"series plus {NEW_TEST}")
    assert UNLISTED_TEST not in out.read_text()
    assert EXTENDED_TEST not in out.read_text()
    assert "fix_tests/" not in out.read_text()
    (data / "patches/torch-2.4.1/tests").unlink()
    code, stdout, _ = run("export", str(out))
    assert code == 0
    assert stdout.strip().endswith("series plus no test files")
    assert NEW_TEST not in out.read_text()


def test_export_is_deterministic(run, tmp_path):
    first, second = tmp_path / "a.patch", tmp_path / "b.patch"
    run("export", str(first))
    run("export", str(second))
    assert first.read_bytes() == second.read_bytes()


def test_export_defaults_to_the_installed_release(run, data, install, tmp_path):
    other = data / "patches/torch-2.5.0"
    other.mkdir()
    (other / "series").write_text("")
    code, out, _ = run("export", str(tmp_path / "x.patch"))
    assert code == 0
    assert out.startswith(f"wrote {tmp_path / 'x.patch'}: torch 2.4.1 series")
    empty = tmp_path / "no-torch"
    empty.mkdir()
    code, _, err = run(
        "export", str(tmp_path / "y.patch"), target=("--site-packages", str(empty))
    )
    assert code == 1
    assert err == (
        f"torchpatch: error: torch is not installed in {empty}: pass "
        "--torch-version, one of: 2.4.1, 2.5.0\n"
    )
    code, _, _ = run(
        "export", str(tmp_path / "y.patch"), "--torch-version", "2.4.1", target=()
    )
    assert code == 0


def test_exported_patch_passes_git_apply_check_only_on_matching_tree(
    run, source_tree, tmp_path
):
    out = tmp_path / "upstream.patch"
    run("export", str(out))
    (source_tree / NEW_TEST).parent.mkdir(parents=True, exist_ok=True)
    (source_tree / NEW_TEST).write_bytes(b"already here\n")
    proc = subprocess.run(
        ["git", "apply", "--check", str(out)], cwd=source_tree, capture_output=True
    )
    assert proc.returncode != 0
    assert b"already exists" in proc.stderr


def test_export_of_an_empty_series_is_refused(run, data, tmp_path):
    series_dir = data / "patches/torch-2.4.1"
    for patch in series_dir.glob("*.patch"):
        patch.unlink()
    (series_dir / "series").write_text("# nothing yet\n")
    out = tmp_path / "x.patch"
    code, _, err = run("export", str(out))
    assert code == 1
    assert "has no patches to export" in err
    assert not out.exists()


def test_export_to_standard_output(run, tmp_path):
    out = tmp_path / "upstream.patch"
    run("export", str(out))
    code, stdout, err = run("export", "-")
    assert code == 0
    assert err == ""
    assert stdout.encode() == out.read_bytes()


@pytest.mark.parametrize(
    "where, reason",
    [
        ("missing/dir/x.patch", "No such file or directory"),
        ("a-file/x.patch", "Not a directory"),
    ],
)
def test_export_to_a_path_that_cannot_be_written(run, tmp_path, where, reason):
    (tmp_path / "a-file").write_text("")
    out = tmp_path / where
    code, stdout, err = run("export", str(out))
    assert code == 1
    assert stdout == ""
    assert err == f"torchpatch: error: cannot write {out}: {reason}\n"
    assert not out.exists()


def _carry_the_test(upstream, data, extended=None):
    """A series whose test commit creates NEW_TEST itself, and whose last
    patch, given extended, changes it to that text."""
    fakes.write_tree(upstream, {NEW_TEST: NEW_TEST_TEXT})
    fakes.git(upstream, "add", "-A")
    fakes.git(upstream, "commit", "-qm", "[dynamo] Test it\n\nThe new test.")
    if extended is not None:
        fakes.write_tree(upstream, {NEW_TEST: extended})
        fakes.git(upstream, "commit", "-qam", "[dynamo] Test more\n\nOne more.")
    series_dir = data / "patches/torch-2.4.1"
    for patch in series_dir.glob("*.patch"):
        patch.unlink()
    first = "HEAD~3" if extended is None else "HEAD~4"
    fakes.git(upstream, "format-patch", "-q", "--zero-commit", "-o",
              str(series_dir), first)  # fmt: skip
    names = sorted(p.name for p in series_dir.glob("*.patch"))
    (series_dir / "series").write_text("\n".join(names) + "\n")
    return series_dir / names[-1]


def test_a_test_file_the_series_carries_is_exported_once(
    run, upstream, data, source_tree, tmp_path
):
    _carry_the_test(upstream, data)
    out = tmp_path / "upstream.patch"
    code, _, _ = run("export", str(out))
    assert code == 0
    assert out.read_text().count(f"diff --git a/{NEW_TEST} ") == 1
    fakes.git(source_tree, "apply", str(out))
    assert (source_tree / NEW_TEST).read_bytes() == NEW_TEST_TEXT


def test_a_stale_carried_test_file_is_refused_then_refreshed(
    run, upstream, data, source_tree, tmp_path
):
    from torchpatch import export, series

    test_commit = _carry_the_test(upstream, data)
    changed = b"def test_new():\n    assert 1 + 1 == 2\n"
    (data / NEW_TEST_SOURCE).write_bytes(changed)
    out = tmp_path / "upstream.patch"
    code, _, err = run("export", str(out))
    assert code == 1
    assert err.startswith(f"torchpatch: error: {test_commit} creates {NEW_TEST} ")
    assert err.count("\n") == 1
    assert not out.exists()

    found = series.load_series(data / "patches", "2.4.1")
    assert export.refresh_carried(found, data) == [test_commit]
    assert export.refresh_carried(found, data) == []  # now in sync: a no-op
    fakes.git(source_tree, "checkout", "-q", "-b", "pr")
    for patch in found.patches:
        fakes.git(source_tree, "am", "-q", "--keep-non-patch", str(patch.path))
    assert (source_tree / NEW_TEST).read_bytes() == changed
    assert run("export", str(out))[0] == 0


def test_a_carried_test_file_that_a_later_commit_extends(
    run, upstream, data, source_tree, tmp_path
):
    # One commit creates the test file, the next adds a test to it: the
    # series leaves the second text, which FILE must equal.
    from torchpatch import export, series

    extended = NEW_TEST_TEXT + b"\n\ndef test_more():\n    assert 2 + 2 == 4\n"
    _carry_the_test(upstream, data, extended)
    found = series.load_series(data / "patches", "2.4.1")
    out = tmp_path / "upstream.patch"

    (data / NEW_TEST_SOURCE).write_bytes(NEW_TEST_TEXT)  # the first text only
    code, _, err = run("export", str(out))
    assert code == 1
    assert f"creates {NEW_TEST} unlike" in err
    with pytest.raises(export.MalformedSeries, match="written by several patches"):
        export.refresh_carried(found, data)

    (data / NEW_TEST_SOURCE).write_bytes(extended)
    assert run("export", str(out))[0] == 0
    assert out.read_text().count(f"diff --git a/{NEW_TEST} ") == 2
    fakes.git(source_tree, "apply", str(out))
    assert (source_tree / NEW_TEST).read_bytes() == extended


def test_a_helper_module_is_exported_and_not_run(run, data, tmp_path):
    # A listed file not named test_*.py is a module the test files import:
    # the pull request adds it with them, and it is not run as a test.
    from torchpatch import series

    helper = data / "fix_tests/this_era/_helpers.py"
    helper.write_bytes(b"HELPER = 1\n")
    tests_file = data / "patches/torch-2.4.1/tests"
    tests_file.write_text(
        f"fix_tests/this_era/_helpers.py -> test/dynamo/_helpers.py\n"
        f"{tests_file.read_text()}"
    )
    found = series.load_series(data / "patches", "2.4.1")
    assert [t.path for t in found.tests if t.runs] == [NEW_TEST_SOURCE, EXTENDED_TEST]
    out = tmp_path / "upstream.patch"
    code, _, _ = run("export", str(out))
    assert code == 0
    text = out.read_text()
    assert " create mode 100644 test/dynamo/_helpers.py" in text
    assert "+HELPER = 1" in text
