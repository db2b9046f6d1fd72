"""A fake torch install and a real `git format-patch` series to patch it with.

The pristine "upstream" tree has two torch/ files and one test file; the
series' first patch changes all three, its second changes one torch/ file
again, so status, partial application and ordering can all be observed.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"  # torchpatch, for subprocesses
SIDE_EFFECTS = "torch/_dynamo/side_effects.py"
BUILTIN = "torch/_dynamo/variables/builtin.py"
TEST_MISC = "test/dynamo/test_misc.py"
UNTOUCHED = "torch/_dynamo/utils.py"


def _module(name: str, body: str) -> bytes:
    filler = "".join(f"# {name} line {i}\n" for i in range(20))
    return f"{filler}def {name}():\n    return {body!r}\n{filler}".encode()


PRISTINE = {
    "torch/__init__.py": b"__version__ = '2.4.1'\n",
    SIDE_EFFECTS: _module("check", "old"),
    BUILTIN: _module("call_setattr", "old"),
    UNTOUCHED: _module("helper", "same"),
    TEST_MISC: _module("test_map_side_effects", "old"),
}
AFTER_FIRST = {
    SIDE_EFFECTS: _module("check", "first"),
    BUILTIN: _module("call_setattr", "first"),
    TEST_MISC: _module("test_map_side_effects", "first"),
}
AFTER_SECOND = {SIDE_EFFECTS: _module("check", "second")}
PATCHED = {**PRISTINE, **AFTER_FIRST, **AFTER_SECOND}
# A test file the pull request adds (where it lands upstream, and where this
# project keeps it), and one only this project runs: export leaves it out.
NEW_TEST = "test/dynamo/test_new_behaviour.py"
NEW_TEST_SOURCE = "fix_tests/this_era/test_new_behaviour.py"
NEW_TEST_TEXT = b"def test_new():\n    assert True\n"
EXTENDED_TEST = "fix_tests/this_era/test_extended.py"
# A test file of another series: export must leave it out.
UNLISTED_TEST = "test/dynamo/test_other_series.py"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)


def make_upstream(root: Path) -> Path:
    """A git checkout of the pristine tree with the two patches as commits."""
    root.mkdir()
    write_tree(root, {**PRISTINE, "version.txt": b"2.4.1\n"})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "pristine")
    for subject, change in (
        ("[dynamo] First change", AFTER_FIRST),
        ("[dynamo] Second change", AFTER_SECOND),
    ):
        write_tree(root, change)
        git(root, "commit", "-qam", f"{subject}\n\nWhy it is needed.")
    return root


def make_data(root: Path, upstream: Path, version: str = "2.4.1") -> Path:
    """A project data root: patches/torch-<version>/ and fix_tests/."""
    series_dir = root / "patches" / f"torch-{version}"
    series_dir.mkdir(parents=True)
    git(
        upstream, "format-patch", "-q", "--zero-commit", "-o", str(series_dir), "HEAD~2"
    )
    names = sorted(p.name for p in series_dir.glob("*.patch"))
    (series_dir / "series").write_text("# test series\n" + "\n".join(names) + "\n")
    (series_dir / "tests").write_text(
        f"# its tests\n{NEW_TEST_SOURCE} -> {NEW_TEST}\n{EXTENDED_TEST}\n"
    )
    write_tree(
        root,
        {
            NEW_TEST_SOURCE: NEW_TEST_TEXT,
            EXTENDED_TEST: NEW_TEST_TEXT,
            UNLISTED_TEST: NEW_TEST_TEXT,
        },
    )
    return root


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass
class FakeInstall:
    site_packages: Path

    def read(self, path: str) -> bytes:
        return (self.site_packages / path).read_bytes()

    def snapshot(self) -> dict[str, bytes]:
        """Every file and its bytes, to show that nothing changed."""
        return {
            p.relative_to(self.site_packages).as_posix(): p.read_bytes()
            for p in sorted(self.site_packages.rglob("*"))
            if p.is_file()
        }


def make_install(site_packages: Path, version: str = "2.4.1") -> FakeInstall:
    files = {p: d for p, d in PRISTINE.items() if p.startswith("torch/")}
    write_tree(site_packages, files)
    dist_info = site_packages / f"torch-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
    )
    rows = [f"{p},{record_hash(d)},{len(d)}" for p, d in files.items()]
    rows += [f"{dist_info.name}/METADATA,,", f"{dist_info.name}/RECORD,,"]
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n")
    return FakeInstall(site_packages)


def carry_the_test(upstream: Path, data: Path, extended: bytes | None = None) -> Path:
    """A series whose test commit creates NEW_TEST itself, and whose last
    patch, given extended, changes it to that text: its last patch."""
    write_tree(upstream, {NEW_TEST: NEW_TEST_TEXT})
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "[dynamo] Test it\n\nThe new test.")
    if extended is not None:
        write_tree(upstream, {NEW_TEST: extended})
        git(upstream, "commit", "-qam", "[dynamo] Test more\n\nOne more.")
    series_dir = data / "patches/torch-2.4.1"
    for patch in series_dir.glob("*.patch"):
        patch.unlink()
    first = "HEAD~3" if extended is None else "HEAD~4"
    git(upstream, "format-patch", "-q", "--zero-commit", "-o", str(series_dir), first)
    names = sorted(p.name for p in series_dir.glob("*.patch"))
    (series_dir / "series").write_text("\n".join(names) + "\n")
    return series_dir / names[-1]
