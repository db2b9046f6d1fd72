"""What every maintainer tool uses: where things are, git, torchpatch,
pytest and its JUnit reports, torch wheels, the two states of a torch (as
trees of files, or as copies of a virtualenv to run in), and the generated
parts of README and docs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from torchpatch import bundle, series, snapshots
from torchpatch.state import inspect
from torchpatch.targets import InstalledTorch

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"  # scratch, not committed
RESULTS = ROOT / "results"  # the records the repository carries
UPSTREAM = ROOT.parent / "shared" / "upstream"  # PyTorch's files, read-only
MAIN = UPSTREAM / "pytorch-main"
SHIMS = Path(__file__).resolve().parent / "shims"
STATES = ("pristine", "patched")
# pytest as the tools run it: quiet, and leaving nothing in the checkout.
PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:logging")
IDENTITY = ("-c", "user.name=torchpatch tools", "-c", "user.email=tools@localhost")


class Failed(RuntimeError):
    """A command the tools ran failed; the message says which and why."""


def run(args: Sequence[str | Path], cwd: Path | None = None,
        env: Mapping[str, str] | None = None) -> str:  # fmt: skip
    """args' output; Failed with its error output if it fails. git never
    takes this checkout for the tree it works on."""
    ceiling = str(cwd.parent) if cwd else ""
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True,
        env=dict(env or os.environ, GIT_CEILING_DIRECTORIES=ceiling,
                 GIT_EDITOR="true", LC_ALL="C"),
    )  # fmt: skip
    if proc.returncode != 0:
        command = " ".join(map(str, args))
        raise Failed(f"{command}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git in repo, as a scratch repository's committer."""
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=repo, capture_output=True, text=True,
        check=check, env=dict(os.environ, GIT_CEILING_DIRECTORIES=str(repo.parent),
                              GIT_EDITOR="true", LC_ALL="C"),
    )  # fmt: skip


def torchpatch(*args: str | Path, python: str | Path = sys.executable) -> str:
    """`python -m torchpatch args`: its output; Failed with its error line."""
    return run([python, "-m", "torchpatch", *args])


def dep3(text: str) -> dict[str, str]:
    """The fields of a DEP-3 header; a continuation line starts with a space."""
    fields: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith(" ") and fields:
            fields[-1] = (fields[-1][0], f"{fields[-1][1]}\n{line}")
            continue
        name, colon, value = line.partition(":")
        if colon and name and not name.startswith("#"):
            fields.append((name, value.strip()))
    return dict(fields)


# pytest and its reports


def pytest_command(*args: str | Path, python: str | Path = sys.executable) -> list[str]:
    return [str(python), *PYTEST, *map(str, args)]


def junit(args: Sequence[str | Path], python: str | Path = sys.executable,
          cwd: Path = ROOT, env: Mapping[str, str] | None = None) -> dict[str, str]:  # fmt: skip
    """{class::test: passed | failure | error | skipped} of a pytest run."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        subprocess.run(
            pytest_command(f"--junitxml={report}", *args, python=python), cwd=cwd,
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        return outcomes(report) if report.is_file() else {}


def outcomes(report: Path) -> dict[str, str]:
    """{class::test: passed | failure | error | skipped} of a JUnit report."""
    found = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = next(
            (k for k in ("failure", "error", "skipped") if k in kinds), "passed"
        )
        # classname is dotted from the rootdir: keep what names the test.
        where = case.get("classname", "").removeprefix("test.")
        found[f"{where}::{case.get('name')}"] = outcome
    return found


def counts(found: Mapping[str, str]) -> dict[str, int]:
    """pytest's counts of a run's outcomes."""
    values = list(found.values())
    return {
        "tests": len(values),
        "failures": values.count("failure"),
        "errors": values.count("error"),
        "skipped": values.count("skipped"),
        "passed": values.count("passed"),
    }


# torch wheels


def fetch_wheel(release: str, into: Path) -> Path:
    """torch release's wheel for CPython 3.11, from pip's cache or PyPI."""
    try:
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
             "--disable-pip-version-check", "--only-binary=:all:",
             "--python-version=3.11", "-d", into, f"torch=={release}"],
            env=dict(os.environ, PIP_CONSTRAINT=os.devnull))  # fmt: skip
    except Failed:
        raise Failed(
            f"torch {release}: pip found no wheel of it for CPython 3.11"
        ) from None
    (wheel,) = into.glob("torch-*.whl")
    return wheel


def wheel_files(release: str, keep: Callable[[str], bool], into: Path) -> None:
    """Writes into/<name> for each name of release's wheel that keep keeps."""
    with tempfile.TemporaryDirectory() as download:
        with zipfile.ZipFile(fetch_wheel(release, Path(download))) as archive:
            for name in filter(keep, archive.namelist()):
                archive.extract(name, into)


# The two states of a torch


def installed_series() -> tuple[InstalledTorch, series.Series]:
    """This interpreter's torch, and the series that serves it."""
    install = InstalledTorch.find()
    return install, series.load_series(bundle.data_root() / "patches", install.version)


def write_tree(tree: Path, state: str, sources: Iterable[str] = ()) -> list[str]:
    """tree: the installed torch's files matching sources (globs under its
    site-packages), and the files the series touches as they are in a state,
    whichever state the install is in (torchpatch's own snapshots). Returns
    the .py files under torch/ that the series touches."""
    install, found = installed_series()
    for pattern in sources:
        for source in install.root.glob(pattern):
            if source.is_file() and "__pycache__" not in source.parts:
                target = tree / source.relative_to(install.root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    files = inspect(install, found).pristine
    if state == "patched":
        files = snapshots.patched(files, found.patches)
    for path, data in files.items():
        (tree / path).unlink(missing_ok=True)
        if data is not None:
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_bytes(data)
    return [p for p in files if p.endswith(".py")]


@contextmanager
def venv_states(work: Path, venv: Path = Path(sys.prefix)) -> Iterator[dict[str, Path]]:
    """{state: python} of two copies of venv, one pristine, one patched, to
    run in side by side; removed on exit. Their files are hard links to
    venv's: torchpatch writes new files and renames them into place, so
    patching a copy never writes through a link, and they cost no disk."""
    pythons: dict[str, Path] = {}
    try:
        for name, command in zip(STATES, ("revert", "apply")):
            copy = work / f"venv-{name}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(venv, copy, symlinks=True, copy_function=os.link)
            pythons[name] = copy / "bin" / "python"
            torchpatch(command, python=pythons[name])
        yield pythons
    finally:
        for name in STATES:
            shutil.rmtree(work / f"venv-{name}", ignore_errors=True)


def site_packages(python: Path) -> Path:
    code = "import torch, pathlib; print(pathlib.Path(torch.__file__).parents[1])"
    return Path(run([python, "-c", code]).strip())


# Generated parts of README and docs


def between_markers(text: str, begin: str, end: str, rendered: str) -> str:
    """text with what lies between the lines begin and end replaced."""
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise SystemExit(f"no {begin!r} ... {end!r} to fill in")
    return f"{head}{begin}\n{rendered}\n{end}{tail}"


def new_file_diff(source: Path, relpath: str) -> bytes:
    """A `diff --git` section that creates relpath with source's bytes, as
    format-patch writes it."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / relpath).parent.mkdir(parents=True)
        shutil.copyfile(source, Path(tmp) / relpath)
        proc = subprocess.run(
            ["git", "-c", "core.quotepath=off", "diff", "--no-index", "--no-color",
             "--no-ext-diff", "--full-index", "--src-prefix=a/", "--dst-prefix=b/",
             "/dev/null", relpath],
            cwd=tmp, capture_output=True, env=dict(os.environ, LC_ALL="C"),
        )  # fmt: skip
    if proc.returncode != 1:  # --no-index exits 1 when the files differ
        raise Failed(f"git diff --no-index {relpath}: {proc.stderr.decode()}")
    return proc.stdout
