"""--source-tree: the whole series, test/ hunks included, on a checkout."""

from __future__ import annotations

import json

import fakes
from fakes import PATCHED, PRISTINE, TEST_MISC


def test_apply_and_revert_a_source_tree(run, source_tree):
    target = ("--source-tree", str(source_tree))
    code, out, _ = run("apply", target=target)
    assert code == 0
    assert out.startswith("applied 2 patches to PyTorch 2.4.1 source tree")
    for path in (*PATCHED,):
        assert (source_tree / path).read_bytes() == PATCHED[path], path
    assert fakes.git(source_tree, "status", "--porcelain").count(" M ") == 3

    _, out, _ = run("status", "--json", target=target)
    report = json.loads(out)
    assert report["state"] == "applied"
    assert {f["path"]: f["matches_record"] for f in report["files"]}[TEST_MISC] is None

    code, out, _ = run("apply", target=target)
    assert out.startswith("already applied")
    code, out, _ = run("revert", target=target)
    assert out.startswith("reverted 2 patches")
    assert fakes.git(source_tree, "status", "--porcelain") == ""
    for path in PRISTINE:
        assert (source_tree / path).read_bytes() == PRISTINE[path], path


def test_torch_version_overrides_version_txt(run, source_tree):
    (source_tree / "version.txt").write_text("2.5.0a0\n")
    code, _, err = run("status", target=("--source-tree", str(source_tree)))
    assert code == 1
    assert "no patch series for torch 2.5.0" in err
    code, out, _ = run(
        "status",
        target=("--source-tree", str(source_tree), "--torch-version", "2.4.1"),
    )
    assert code == 0
    assert "pristine" in out


def test_source_tree_that_diverged_is_refused(run, source_tree):
    (source_tree / TEST_MISC).write_bytes(b"rewritten upstream\n")
    code, _, err = run("apply", target=("--source-tree", str(source_tree)))
    assert code == 1
    assert "does not apply cleanly" in err
    assert (source_tree / TEST_MISC).read_bytes() == b"rewritten upstream\n"
    assert fakes.git(source_tree, "status", "--porcelain").strip() == f"M {TEST_MISC}"
