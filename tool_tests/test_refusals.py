"""Every bad input: a clear message, a non-zero exit, and no byte changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import fakes
import pytest
from fakes import BUILTIN, SIDE_EFFECTS, SRC

from torchpatch.cli import main
from torchpatch.targets import InstalledTorch

UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]


def refused(run, install, *args, target=None):
    before = install.snapshot()
    code, out, err = run(*args, target=target)
    assert code == 1
    assert out == ""
    assert err.startswith("torchpatch: error: ")
    assert install.snapshot() == before
    return err


@pytest.mark.parametrize("command", ["apply", "revert", "apply --check"])
def test_locally_modified_file_is_named_with_the_reinstall_command(
    run, install, command
):
    fakes.write_tree(install.site_packages, {BUILTIN: b"# edited by hand\n"})
    err = refused(run, install, *command.split())
    assert "neither pristine nor patched" in err
    assert BUILTIN in err and SIDE_EFFECTS not in err
    assert "pip install --force-reinstall --no-deps torch==2.4.1" in err


def test_patched_then_edited_file_is_refused(run, install):
    run("apply")
    path = install.site_packages / SIDE_EFFECTS
    path.write_bytes(path.read_bytes() + b"# local edit\n")
    err = refused(run, install, "revert")
    assert SIDE_EFFECTS in err


def test_no_torch_installed(data, tmp_path, capsys):
    empty = tmp_path / "empty-site-packages"
    empty.mkdir()
    code = main(["--data", str(data), "status", "--site-packages", str(empty)])
    assert code == 1
    assert f"torch is not installed in {empty}" in capsys.readouterr().err


def test_version_without_series_names_the_supported_ones(data, tmp_path, capsys):
    install = fakes.make_install(tmp_path / "sp", version="2.3.0")
    before = install.snapshot()
    code = main(
        ["--data", str(data), "apply", "--site-packages", str(install.site_packages)]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "no patch series for torch 2.3.0; supported versions: 2.4.1" in err
    assert install.snapshot() == before


def test_patch_that_does_not_apply(run, install, data):
    # Same RECORD-verified files, but the series expects other contents.
    for patch in (data / "patches/torch-2.4.1").glob("*.patch"):
        patch.write_bytes(
            patch.read_bytes().replace(b"-    return 'old'", b"-    return 'elsewhere'")
        )
    err = refused(run, install, "apply")
    assert "does not apply cleanly" in err


def test_git_missing(run, install, monkeypatch, tmp_path):
    no_git = tmp_path / "bin-without-git"
    no_git.mkdir()
    monkeypatch.setenv("PATH", str(no_git))
    err = refused(run, install, "apply")
    assert "git is not on PATH" in err


@pytest.mark.parametrize(
    "series_text, message",
    [
        ("0001-missing.patch\n", "'0001-missing.patch' does not exist"),
        ("{first}\n{first}\n", "is listed twice"),
        ("{first} -p1\n", "expected one patch file name"),
        ("../{first}\n", "must name a file in"),
        ("{first}\n", "patch files not listed in the series"),
    ],
)
def test_malformed_series_file(run, install, data, series_text, message):
    series_dir = data / "patches/torch-2.4.1"
    first = sorted(p.name for p in series_dir.glob("*.patch"))[0]
    (series_dir / "series").write_text(series_text.format(first=first))
    err = refused(run, install, "apply")
    assert message in err
    assert str(series_dir / "series") in err or "series" in err


@pytest.mark.parametrize(
    "text, message",
    [
        (b"just some text\n", "not in `git format-patch` form"),
        (
            b"From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\nno diff\n",
            "no `diff --git`",
        ),
    ],
)
def test_patch_file_not_in_format_patch_form(run, install, data, text, message):
    series_dir = data / "patches/torch-2.4.1"
    sorted(series_dir.glob("*.patch"))[0].write_bytes(text)
    err = refused(run, install, "apply")
    assert message in err


def test_source_tree_option_needs_a_pytorch_tree(run, install, tmp_path):
    err = refused(run, install, "status", target=("--source-tree", str(tmp_path)))
    assert "is not a PyTorch source tree" in err


def test_torch_version_needs_source_tree(run, install):
    err = refused(run, install, "apply", "--torch-version", "2.4.1")
    assert "--torch-version goes with --source-tree" in err


def torchpatch_with_read_only(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """torchpatch args, with folder a read-only bind mount in a private mount
    namespace: read-only even for root, and nothing is left mounted after."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1)")
    if subprocess.run([*UNSHARE, "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not available here")
    mount_read_only = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    return subprocess.run(
        [*UNSHARE, "sh", "-c", mount_read_only, "sh", str(folder), sys.executable,
         "-m", "torchpatch", *args],
        capture_output=True, text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(SRC)},
    )  # fmt: skip


def test_read_only_install(data, install):
    before = install.snapshot()
    sp = str(install.site_packages)
    proc = torchpatch_with_read_only(
        install.site_packages, "--data", str(data), "apply", "--site-packages", sp
    )
    assert proc.returncode == 1, proc.stderr
    assert "the install is read-only for this user" in proc.stderr
    assert install.snapshot() == before


def test_failed_write_rolls_back_and_names_the_failing_file(run, install, monkeypatch):
    from torchpatch import writes

    real_replace = writes._replace

    def replace(file, data):
        # Files are written in sorted order: side_effects.py is written
        # first and must be rolled back when builtin.py fails.
        if file.name == "builtin.py" and data != fakes.PRISTINE[BUILTIN]:
            raise OSError(28, "No space left on device")
        real_replace(file, data)

    monkeypatch.setattr(writes, "_replace", replace)
    err = refused(run, install, "apply")
    assert f"could not write {install.site_packages / BUILTIN}:" in err
    assert "nothing was changed" in err


def test_export_to_a_read_only_folder(data, tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    proc = torchpatch_with_read_only(
        folder,
        *("--data", str(data), "export", str(folder / "x.patch")),
        *("--torch-version", "2.4.1"),
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        f"torchpatch: error: cannot write {folder / 'x.patch'}: Read-only file system\n"
    )
    assert list(folder.iterdir()) == []


def test_a_failing_git_is_one_line(run, tmp_path, monkeypatch):
    # git.diffstat raised a bare RuntimeError, which
    # reached the user as a traceback.
    from torchpatch import git

    real = git._run

    def failing(args, cwd, stdin=b""):
        if args[0] == "apply" and "--stat" in args:
            return subprocess.CompletedProcess(args, 128, b"", b"fatal: bad\nmore\n")
        return real(args, cwd, stdin)

    monkeypatch.setattr(git, "_run", failing)
    out = tmp_path / "pr.patch"
    code, _, err = run("export", str(out))
    assert code == 1
    assert err == "torchpatch: error: git apply --stat failed (exit 128): fatal: bad\n"
    assert not out.exists()


def test_a_revert_that_does_not_read_back_says_what_was_written(
    run, install, monkeypatch
):
    # The one refusal raised after writing: it names the files and how to
    # restore them.
    from torchpatch import commands

    run("apply")
    real_read, real_write, written = commands.snapshots.read, commands.writes.write, []

    def write(*args):
        written.append(True)
        return real_write(*args)

    def read(root, paths):
        found = real_read(root, paths)
        return {
            p: (b"garbage" if written and p == BUILTIN else d) for p, d in found.items()
        }

    monkeypatch.setattr(commands.writes, "write", write)
    monkeypatch.setattr(commands.snapshots, "read", read)
    code, _, err = run("revert")
    assert code == 1
    assert err.count("\n") == 1
    assert (
        f"reverted torch 2.4.1 at {install.site_packages}, but {BUILTIN} do not" in err
    )
    assert "restore them with: " in err and "--force-reinstall" in err


def test_an_unforeseen_os_error_is_one_line(run, install, monkeypatch):
    from torchpatch import commands

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(install.site_packages))

    monkeypatch.setattr(commands.state, "inspect", denied)
    code, out, err = run("status")
    assert code == 1
    assert err == f"torchpatch: error: Permission denied: {install.site_packages}\n"


@pytest.mark.parametrize(
    "version, index",
    [
        ("2.13.0", ""),
        ("2.13.0+cpu", " --index-url https://download.pytorch.org/whl/cpu"),
        ("2.4.1+cu124", " --index-url https://download.pytorch.org/whl/cu124"),
    ],
)
def test_reinstall_command_names_the_target_environment(tmp_path, version, index):
    # The environment of --site-packages, not the one torchpatch runs in; a
    # local version comes from PyTorch's own index, not PyPI.
    venv = tmp_path / "other-venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text("")
    target = InstalledTorch(site, version.split("+")[0], version, {})
    install = f"{venv / 'bin' / 'python'} -m pip install --force-reinstall --no-deps"
    wheel = f"torch-{version}-py3-none-any.whl"
    assert target.reinstall_command == (
        f"{install} torch=={version}{index}; or offline, with that wheel "
        f"({wheel}) in this folder: {install} --no-index ./{wheel}"
    )
