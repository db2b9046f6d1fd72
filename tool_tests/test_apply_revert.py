"""apply, revert and status on an installed torch, on the happy paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import fakes
from fakes import BUILTIN, PATCHED, PRISTINE, SIDE_EFFECTS, UNTOUCHED

from torchpatch.targets import InstalledTorch

TORCH_FILES = [SIDE_EFFECTS, BUILTIN, UNTOUCHED]


def assert_files(install, expected):
    for path in TORCH_FILES:
        assert install.read(path) == expected[path], path


def test_status_of_pristine_install(run):
    code, out, _ = run("status", "--json")
    report = json.loads(out)
    assert code == 0
    assert report["state"] == "pristine"
    assert report["target"]["version"] == "2.4.1"
    assert [p["status"] for p in report["patches"]] == ["not applied"] * 2
    assert [p["subject"] for p in report["patches"]] == [
        "[dynamo] First change",
        "[dynamo] Second change",
    ]
    assert {f["path"]: f["matches_record"] for f in report["files"]} == {
        SIDE_EFFECTS: True,
        BUILTIN: True,
    }


def test_apply_patches_the_torch_files_only(run, install):
    code, out, _ = run("apply")
    assert code == 0
    assert out.startswith("applied 2 patches to torch 2.4.1")
    assert_files(install, PATCHED)
    assert not (install.site_packages / "test").exists()
    _, out, _ = run("status", "--json")
    report = json.loads(out)
    assert report["state"] == "applied"
    assert [p["status"] for p in report["patches"]] == ["applied"] * 2
    assert all(f["matches_record"] is False for f in report["files"])


def test_second_apply_is_a_no_op(run, install):
    run("apply")
    before = install.snapshot()
    mtimes = {p: os.stat(install.site_packages / p).st_mtime_ns for p in TORCH_FILES}
    code, out, _ = run("apply")
    assert code == 0
    assert out.startswith("already applied")
    assert install.snapshot() == before
    assert mtimes == {
        p: os.stat(install.site_packages / p).st_mtime_ns for p in TORCH_FILES
    }


def test_check_changes_nothing(run, install):
    before = install.snapshot()
    code, out, _ = run("apply", "--check")
    assert code == 0
    assert out.startswith("would apply 2 patches")
    assert SIDE_EFFECTS in out and BUILTIN in out
    assert install.snapshot() == before
    run("apply")
    patched = install.snapshot()
    code, out, _ = run("revert", "--check")
    assert out.startswith("would revert 2 patches")
    assert install.snapshot() == patched


def test_revert_restores_the_record_bytes(run, install):
    run("apply")
    code, out, _ = run("revert")
    assert code == 0
    assert "the files match the wheel's RECORD" in out
    assert_files(install, PRISTINE)
    torch = InstalledTorch.find(install.site_packages)
    for path in TORCH_FILES:
        assert torch.matches_record(path, install.read(path))
    code, out, _ = run("revert")
    assert out.startswith("already pristine")


def test_apply_twice_revert_apply_gives_the_first_result(run, install):
    run("apply")
    first = install.snapshot()
    run("apply")
    run("revert")
    run("apply")
    assert install.snapshot() == first


def test_partially_applied_series_is_completed(run, install, upstream):
    fakes.write_tree(
        install.site_packages, {SIDE_EFFECTS: fakes.AFTER_FIRST[SIDE_EFFECTS]}
    )
    fakes.write_tree(install.site_packages, {BUILTIN: fakes.AFTER_FIRST[BUILTIN]})
    _, out, _ = run("status", "--json")
    report = json.loads(out)
    assert report["state"] == "partially applied"
    assert [p["status"] for p in report["patches"]] == ["applied", "not applied"]
    code, out, _ = run("apply")
    assert out.startswith("applied 1 patch to")
    assert_files(install, PATCHED)


def test_patched_files_are_new_files_not_writes_through_hard_links(
    run, install, tmp_path
):
    cache = tmp_path / "package-cache-copy.py"
    os.link(install.site_packages / SIDE_EFFECTS, cache)
    os.chmod(install.site_packages / BUILTIN, 0o640)
    run("apply")
    assert cache.read_bytes() == PRISTINE[SIDE_EFFECTS]
    assert not os.path.samefile(cache, install.site_packages / SIDE_EFFECTS)
    assert os.stat(install.site_packages / BUILTIN).st_mode & 0o777 == 0o640
    run("revert")
    assert cache.read_bytes() == PRISTINE[SIDE_EFFECTS]
    assert not os.path.samefile(cache, install.site_packages / SIDE_EFFECTS)


def test_stale_bytecode_of_touched_modules_is_removed(run, install):
    pycache = install.site_packages / "torch/_dynamo/__pycache__"
    pycache.mkdir()
    for name in ("side_effects.cpython-311.pyc", "utils.cpython-311.pyc"):
        (pycache / name).write_bytes(b"stale")
    run("apply")
    assert sorted(p.name for p in pycache.iterdir()) == ["utils.cpython-311.pyc"]
    (pycache / "side_effects.cpython-311.opt-1.pyc").write_bytes(b"stale")
    run("revert")
    assert sorted(p.name for p in pycache.iterdir()) == ["utils.cpython-311.pyc"]


def test_local_version_suffix_uses_the_release_series(data, tmp_path, capsys):
    install = fakes.make_install(tmp_path / "cpu-wheel", version="2.4.1+cpu")
    from torchpatch.cli import main

    code = main(
        ["--data", str(data), "apply", "--site-packages", str(install.site_packages)]
    )
    assert code == 0
    assert "torch 2.4.1+cpu" in capsys.readouterr().out
    assert_files(install, PATCHED)


def test_output_into_a_closed_pipe_is_not_a_traceback(data, install):
    # `torchpatch apply | head -1`, with a reader that leaves before anything
    # is written.
    proc = subprocess.run(
        f"{sys.executable} -m torchpatch --data {data} apply "
        f"--site-packages {install.site_packages} | true",
        shell=True, executable="bash", capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=str(fakes.SRC)),
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    assert install.read(SIDE_EFFECTS) == PATCHED[SIDE_EFFECTS]
