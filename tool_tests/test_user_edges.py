"""The edges a user meets: offline repair, killed runs, the command line."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import fakes
import pytest
from fakes import BUILTIN, PRISTINE, SIDE_EFFECTS, SRC
from killed import torchpatch_killed_before_rename

from torchpatch import snapshots
from torchpatch.cli import main

ROOT = Path(__file__).resolve().parents[1]


def torchpatch(*args: str, tmpdir: Path, cwd: Path | None = None):
    env = dict(os.environ, PYTHONPATH=str(SRC), TMPDIR=str(tmpdir))
    return subprocess.run(
        [sys.executable, "-m", "torchpatch", *args],
        env=env, cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip


def fake_wheel(folder: Path) -> Path:
    """A wheel of the fake torch 2.4.1, as pip installs it."""
    wheel = folder / "torch-2.4.1-py3-none-any.whl"
    files = {p: d for p, d in PRISTINE.items() if p.startswith("torch/")}
    info = "torch-2.4.1.dist-info"
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1\n"
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    rows = [f"{p},{fakes.record_hash(d)},{len(d)}" for p, d in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def test_offline_repair_advice_restores_torch(data, tmp_path):
    # A venv with the fake torch installed from a local wheel; a file edited
    # by hand; the advice's offline command, run as printed where the wheel
    # is, restores the wheel's files without any index.
    venv, wheels = tmp_path / "venv", tmp_path / "wheels"
    wheels.mkdir()
    wheel = fake_wheel(wheels)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--no-index"]
    subprocess.run([*pip, str(wheel)], check=True)
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / BUILTIN).write_bytes(b"# edited by hand\n")
    args = ("--data", str(data), "apply", "--site-packages", str(site))
    refused = torchpatch(*args, tmpdir=tmp_path, cwd=wheels)
    assert refused.returncode == 1
    offline = refused.stderr.split("or offline: ")[1].strip()
    assert offline == (
        f"{python} -m pip install --force-reinstall --no-deps --no-index {wheel}"
    )
    status = torchpatch(*args[:2], "status", *args[3:], tmpdir=tmp_path, cwd=wheels)
    assert f"restore the files with: {python} -m pip install" in status.stdout
    subprocess.run(offline, shell=True, check=True, cwd=wheels, capture_output=True)
    again = torchpatch(*args[:2], "status", *args[3:], tmpdir=tmp_path)
    assert "series" in again.stdout and ": pristine" in again.stdout
    assert (site / BUILTIN).read_bytes() == PRISTINE[BUILTIN]


def test_a_killed_runs_folder_is_listed_then_removed(
    run, install, tmp_path, monkeypatch
):
    # A folder a run killed while it held it: named for a process that is
    # gone. status names it; the next apply removes it and says so.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = tmp_path / f"torchpatch-{gone.pid}-abc"
    (left / "tree" / "torch").mkdir(parents=True)
    mine = tmp_path / f"torchpatch-{os.getpid()}-xyz"  # a running process's
    mine.mkdir()
    _, out, _ = run("status")
    assert f"left by a killed run: {left} (apply or revert removes it)" in out
    assert str(mine) not in out
    code, out, _ = run("apply")
    assert code == 0
    assert f"removed what a killed run left: {left}" in out
    assert not left.exists() and mine.exists()
    assert snapshots.leftovers() == []


# torchpatch, killed at its Nth moment: before or after each `git apply` of
# a patch to its scratch copy, or before a file is renamed into place.
_KILLED_AT = """\
import os, signal, sys
from torchpatch import git
from torchpatch.cli import main

moments = [0]


def moment():
    moments[0] += 1
    if moments[0] == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)


real_apply, real_replace = git.apply, os.replace


def apply(*args, **kwargs):
    moment()
    real_apply(*args, **kwargs)
    moment()


def replace(*args, **kwargs):
    moment()
    real_replace(*args, **kwargs)


git.apply, os.replace = apply, replace
sys.exit(main(sys.argv[2:]))
"""


def test_random_kills_leave_nothing_behind(data, install, tmp_path):
    # kill -9 of apply and revert at random moments, 20 times: once the next
    # command has run, no torchpatch folder is left, and revert restores the
    # files of the wheel's RECORD.
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    site = ("--site-packages", str(install.site_packages))
    env = dict(os.environ, PYTHONPATH=str(SRC), TMPDIR=str(tmpdir))
    rng = random.Random(126355)
    killed = 0
    for i in range(20):
        command = ("apply", "revert")[i % 2]
        proc = subprocess.run(
            [sys.executable, "-c", _KILLED_AT, str(rng.randint(1, 8)),
             "--data", str(data), command, *site],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
        killed += proc.returncode == -signal.SIGKILL
    assert killed >= 10
    done = torchpatch("--data", str(data), "revert", *site, tmpdir=tmpdir)
    assert done.returncode == 0, done.stderr
    assert list(tmpdir.glob("torchpatch-*")) == []
    status = torchpatch("--data", str(data), "status", *site, tmpdir=tmpdir)
    assert ": pristine" in status.stdout
    assert status.stdout.count("matches RECORD") == 2


def test_reverting_a_partly_applied_series_lists_only_its_files(run, data, install):
    run("apply")
    site = ("--site-packages", str(install.site_packages))
    assert torchpatch_killed_before_rename(1, "--data", str(data), "revert", *site)
    code, out, _ = run("revert")
    assert code == 0
    listed = [line.strip() for line in out.splitlines()[1:]]
    assert listed == [SIDE_EFFECTS, BUILTIN] or listed == [BUILTIN, SIDE_EFFECTS]
    assert "removed what a killed run left: torch/_dynamo/" in out.splitlines()[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["status", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_command_line_errors_name_the_problem(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(message)


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_names_the_releases_served(flag, capsys):
    with pytest.raises(SystemExit):
        main([flag])
    assert capsys.readouterr().out == (
        "torchpatch 0.1.0 (series for torch 2.4.0 to 2.15.0)\n"
    )


def test_a_missing_site_packages_folder_is_named(run, tmp_path):
    missing = tmp_path / "nonexistent"
    code, _, err = run("status", target=("--site-packages", str(missing)))
    assert code == 1
    assert err == f"torchpatch: error: --site-packages {missing}: no such folder\n"


@pytest.mark.parametrize("command", ["status", "revert"])
def test_help_does_not_say_patch_where_nothing_is_patched(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "patch the torch" not in out
    assert "the folder that holds the torch to act on" in out


def test_inline_mode_with_a_missing_file_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "torchpatch.inline_mode", "missing.py"],
        env=dict(os.environ, PYTHONPATH=str(SRC)), cwd=tmp_path,
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr == "python -m torchpatch.inline_mode: no such file: missing.py\n"


def test_a_source_tree_without_the_series_files_is_refused(run, tmp_path):
    tree = tmp_path / "empty"
    (tree / "torch").mkdir(parents=True)
    (tree / "version.txt").write_text("2.4.1\n")
    code, _, err = run("status", target=("--source-tree", str(tree)))
    assert code == 1
    assert err == (
        f"torchpatch: error: {tree} has none of the 3 files that the series for "
        "torch 2.4.1 patches: not a PyTorch source tree\n"
    )


def test_users_page_says_how_to_uninstall_and_upgrade():
    page = (ROOT / "docs" / "usage.md").read_text()
    section = page.split("## Uninstalling and upgrading")[1].split("\n## ")[0]
    assert section.index("torchpatch revert") < section.index(
        "pip uninstall torchpatch"
    )
    assert "pip install torch==" in section and "torchpatch apply" in section
