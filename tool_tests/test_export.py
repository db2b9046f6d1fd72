"""export: the series as one upstream patch that git apply and git am both take."""

from __future__ import annotations

import shutil
import subprocess

import fakes
import pytest
from fakes import NEW_TEST, NEW_TEST_TEXT, PATCHED, SIDE_EFFECTS, carry_the_test


def test_export_applies_with_git_apply_and_git_am(run, source_tree, tmp_path):
    out = tmp_path / "upstream.patch"
    code, stdout, _ = run("export", str(out))
    assert code == 0
    assert stdout.startswith(f"wrote {out}")
    text = out.read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [PATCH] [dynamo] First change" in text
    assert "[dynamo] Second change\n\nWhy it is needed." in text
    # One section per patch: side_effects.py twice.
    assert text.count("\ndiff --git ") == 4

    fakes.git(source_tree, "apply", "--check", str(out))
    fakes.git(source_tree, "checkout", "-q", "-b", "pr")
    fakes.git(source_tree, "am", "-q", "--keep-non-patch", str(out))
    subject = fakes.git(source_tree, "log", "-1", "--format=%s")
    assert subject.strip() == "[dynamo] First change"
    for path, data in PATCHED.items():
        assert (source_tree / path).read_bytes() == data, path
    assert fakes.git(source_tree, "status", "--porcelain") == ""


def test_export_and_apply_need_only_the_series(run, data, install, tmp_path):
    # The maintainers' tests of a series (its tests file, fix_tests/) are not
    # in the wheel: export and apply read neither.
    out = tmp_path / "upstream.patch"
    code, stdout, _ = run("export", str(out))
    assert stdout == f"wrote {out}: the torch 2.4.1 series, 2 patches\n"
    before = out.read_bytes()
    shutil.rmtree(data / "fix_tests")
    (data / "patches/torch-2.4.1/tests").write_text("fix_tests/gone.py\n")
    assert run("export", str(out))[0] == 0
    assert out.read_bytes() == before
    assert b"fix_tests/" not in before and NEW_TEST.encode() not in before
    assert run("apply")[0] == 0
    assert install.read(SIDE_EFFECTS) == PATCHED[SIDE_EFFECTS]


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
    assert out.startswith(f"wrote {tmp_path / 'x.patch'}: the torch 2.4.1 series")
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
    (source_tree / SIDE_EFFECTS).write_bytes(b"another release's file\n")
    proc = subprocess.run(
        ["git", "apply", "--check", str(out)], cwd=source_tree, capture_output=True
    )
    assert proc.returncode != 0
    assert b"patch does not apply" in proc.stderr


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


def test_a_test_file_the_series_carries_is_exported_once(
    run, upstream, data, source_tree, tmp_path
):
    carry_the_test(upstream, data)
    out = tmp_path / "upstream.patch"
    code, _, _ = run("export", str(out))
    assert code == 0
    assert out.read_text().count(f"diff --git a/{NEW_TEST} ") == 1
    fakes.git(source_tree, "apply", str(out))
    assert (source_tree / NEW_TEST).read_bytes() == NEW_TEST_TEXT
