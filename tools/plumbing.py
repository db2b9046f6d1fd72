"""What every maintainer tool uses: paths, commands, pytest reports, torch
wheels, the two states of a torch, and the generated parts of pages."""

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
SHIMS = ROOT / "tools" / "shims"
STATES = ("pristine", "patched")
IDENTITY = ("-c", "user.name=torchpatch tools", "-c", "user.email=tools@localhost")
# A release's wheel for CPython 3.11, into a folder (its last argument).
PIP_DOWNLOAD = (
    "-m pip download -q --no-deps --disable-pip-version-check"
    " --only-binary=:all: --python-version=3.11 -d"
)
# A file's creation as format-patch writes it (git diff exits 1: they differ).
NEW_FILE_DIFF = (
    "git -c core.quotepath=off diff --no-index --no-color --no-ext-diff"
    " --full-index --src-prefix=a/ --dst-prefix=b/ /dev/null"
)


class Failed(RuntimeError):
    """A command the tools ran failed; the message says which and why."""


def _env(cwd: Path | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    # git never takes this checkout for a scratch folder's repository.
    ceiling = str(cwd.parent) if cwd else ""
    extra = {"GIT_CEILING_DIRECTORIES": ceiling, "GIT_EDITOR": "true", "LC_ALL": "C"}
    return {**(env or os.environ), **extra}


def run(
    args: Sequence[str | Path],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """args' output; Failed with its error output if it fails."""
    command = [str(a) for a in args]
    proc = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, env=_env(cwd, env)
    )
    if proc.returncode != 0:
        error = (proc.stderr or proc.stdout).strip()[-2000:]
        raise Failed(f"{' '.join(command)}: {error}")
    return proc.stdout


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git in repo, as a scratch repository's committer."""
    command = ["git", *IDENTITY, *args]
    return subprocess.run(
        command, cwd=repo, capture_output=True, text=True, check=check, env=_env(repo)
    )


def torchpatch(*args: str | Path, python: str | Path = sys.executable) -> str:
    return run([python, "-m", "torchpatch", *args])


def dep3(text: str) -> dict[str, str]:
    """The fields of a DEP-3 header; a continuation line starts with a space."""
    fields: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if line.startswith(" ") and name:
            fields[name] += f"\n{line}"
        elif colon and key and not key.startswith("#"):
            name, fields[key] = key, value.strip()
    return fields


def pytest_command(*args: str | Path, python: str | Path = sys.executable) -> list[str]:
    """pytest as the tools run it: quiet, leaving nothing in the checkout."""
    quiet = ["-q", "-p", "no:cacheprovider", "-p", "no:logging"]
    return [str(python), "-m", "pytest", *quiet, *map(str, args)]


def junit(
    args: Sequence[str | Path],
    python: str | Path = sys.executable,
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """{class::test: passed | failure | error | skipped | xfailed} of a pytest
    run."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        subprocess.run(
            pytest_command(f"--junitxml={report}", *args, python=python),
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return outcomes(report) if report.is_file() else {}


def outcomes(report: Path) -> dict[str, str]:
    """{class::test: passed | failure | error | skipped | xfailed} of a JUnit
    report: xfailed, an expected failure (pytest reports it as skipped)."""
    found = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        tags = {child.tag: child for child in case}
        kind = next((k for k in ("failure", "error", "skipped") if k in tags), "passed")
        if kind == "skipped" and tags["skipped"].get("type") == "pytest.xfail":
            kind = "xfailed"
        # classname is dotted from the rootdir: keep what names the test.
        where = case.get("classname", "").removeprefix("test.")
        found[f"{where}::{case.get('name')}"] = kind
    return found


def counts(found: Mapping[str, str]) -> dict[str, int]:
    """pytest's counts of a run's outcomes."""
    n = list(found.values()).count
    kinds = {
        "failures": "failure",
        "errors": "error",
        "skipped": "skipped",
        "xfailed": "xfailed",
    }
    counted = {name: n(kind) for name, kind in kinds.items()}
    return {"tests": len(found), **counted, "passed": n("passed")}


def wheel_files(release: str, keep: Callable[[str], bool], into: Path) -> None:
    """Writes into/<name> for each name of release's CPython 3.11 wheel that
    keep keeps, the wheel from pip's cache or PyPI."""
    with tempfile.TemporaryDirectory() as download:
        try:
            run(
                [sys.executable, *PIP_DOWNLOAD.split(), download, f"torch=={release}"],
                env=dict(os.environ, PIP_CONSTRAINT=os.devnull),
            )
        except Failed:
            raise Failed(
                f"torch {release}: pip found no wheel of it for CPython 3.11"
            ) from None
        (wheel,) = Path(download).glob("torch-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            for name in filter(keep, archive.namelist()):
                archive.extract(name, into)


def installed_series() -> tuple[InstalledTorch, series.Series]:
    """This interpreter's torch, and the series that serves it."""
    install = InstalledTorch.find()
    return install, series.load_series(bundle.data_root() / "patches", install.version)


def write_tree(tree: Path, state: str, sources: Iterable[str] = ()) -> list[str]:
    """Writes into tree the installed torch's files matching sources (globs
    under site-packages), then the series' files as they are in state, whatever
    state the install is in. Returns the .py files the series touches."""
    install, found = installed_series()
    for source in (s for pattern in sources for s in install.root.glob(pattern)):
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
    """{state: python} of two copies of venv, one reverted, one patched, to run
    in side by side; removed on exit. The copies are hard links: torchpatch
    renames new files into place, so it never writes through a link."""
    copies = {state: work / f"venv-{state}" for state in STATES}
    try:
        for copy, command in zip(copies.values(), ("revert", "apply")):
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(venv, copy, symlinks=True, copy_function=os.link)
            torchpatch(command, python=copy / "bin" / "python")
        yield {state: copy / "bin" / "python" for state, copy in copies.items()}
    finally:
        for copy in copies.values():
            shutil.rmtree(copy, ignore_errors=True)


def site_packages(python: Path) -> Path:
    code = "import torch, pathlib; print(pathlib.Path(torch.__file__).parents[1])"
    return Path(run([python, "-c", code]).strip())


def between_markers(text: str, begin: str, end: str, rendered: str) -> str:
    """text with what lies between the lines begin and end replaced."""
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise SystemExit(f"no {begin!r} ... {end!r} to fill in")
    return f"{head}{begin}\n{rendered}\n{end}{tail}"


def new_file_diff(source: Path, relpath: str) -> bytes:
    """The `diff --git` section, as format-patch writes it, that creates
    relpath with source's bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / relpath).parent.mkdir(parents=True)
        shutil.copyfile(source, Path(tmp) / relpath)
        proc = subprocess.run(
            [*NEW_FILE_DIFF.split(), relpath],
            cwd=tmp,
            capture_output=True,
            env=dict(os.environ, LC_ALL="C"),
        )
    if proc.returncode != 1:  # --no-index exits 1 when the files differ
        raise Failed(f"git diff --no-index {relpath}: {proc.stderr.decode()}")
    return proc.stdout
