"""tools/rebase.py on small fake releases: no wheel, no venv, no network."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from tools import plumbing, rebase

FILE = "torch/_dynamo/side_effects.py"
BASE = [f"line {i}\n" for i in range(1, 31)]
PIN_TEXT = "# Pins for torch {to}\nsix==1.16.0\ntorch=={to}\n"
GIT = ["git", "-c", "user.name=tests", "-c", "user.email=tests@localhost"]


def make_series(patches_root: Path, release: str, before: str, after: str) -> Path:
    """patches/torch-<release>/: one patch, made with git, changing before to after."""
    repo = patches_root.parent / f"made-{release}"
    (repo / FILE).parent.mkdir(parents=True)
    (repo / FILE).write_text(before)
    git = GIT
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    (repo / FILE).write_text(after)
    subprocess.run(
        [*git, "commit", "-qam", "[dynamo] Raise one graph break\n\nBecause."],
        cwd=repo,
        check=True,
    )
    series = patches_root / f"torch-{release}"
    series.mkdir(parents=True)
    subprocess.run(
        [*git, "format-patch", "-q", "--zero-commit", "-o", str(series), "-1"],
        cwd=repo,
        check=True,
    )
    (patch,) = series.glob("*.patch")
    (series / "series").write_text(f"# Patches for torch {release}\n{patch.name}\n")
    return series


class Releases:
    """A fetch: the series' file of each release, as a dict gives it."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.asked: list[str] = []

    def __call__(self, release: str, paths: Sequence[str], into: Path) -> None:
        self.asked.append(release)
        if release not in self.files:
            raise plumbing.Failed(f"torch {release}: pip found no wheel of it")
        for path in paths:
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            (into / path).write_text(self.files[release])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    patches = tmp_path / "patches"
    (tmp_path / "requirements").mkdir()
    before = "".join(BASE)
    after = before.replace("line 20\n", "line 20, patched\n")
    make_series(patches, "2.14.1", before, after)
    return patches


def run(project: Path, fetch: Releases, *argv: str) -> int:
    return rebase.run(
        list(argv),
        fetch=fetch,
        pins=lambda old, new: PIN_TEXT.format(to=new),
        patches=project,
        build=project.parent / "build",
    )


def changed(series: Path) -> list[str]:
    return [
        line
        for patch in sorted(series.glob("*.patch"))
        for line in rebase.changed_lines(patch.read_text())
    ]


def test_clean_rebase_onto_the_same_files(project: Path, tmp_path: Path) -> None:
    same = "".join(BASE)
    dest = tmp_path / "dest"
    code = run(project, Releases({"2.14.1": same, "2.14.0": same}), "2.14.1", "2.14.0",
               "--dest", str(dest))  # fmt: skip
    assert code == 0
    (old,) = (project / "torch-2.14.1").glob("*.patch")
    (new,) = dest.glob("*.patch")
    assert new.read_bytes() == old.read_bytes()
    assert "byte-identical" in (dest / "HEADER").read_text()
    assert (dest / "requirements.txt").read_text().startswith("# Pins for torch 2.14.0")
    assert not (project / "torch-2.14.0").exists()


def test_offset_only_rebase(project: Path, tmp_path: Path, capsys) -> None:
    moved = "".join(["new line\n"] * 5 + BASE)
    dest = tmp_path / "dest"
    fetch = Releases({"2.14.1": "".join(BASE), "2.15.0": moved})
    assert run(project, fetch, "2.14.1", "2.15.0", "--dest", str(dest)) == 0
    assert changed(dest) == changed(project / "torch-2.14.1")
    (new,) = dest.glob("*.patch")
    assert "@@ -22,7 +22,7 @@" in new.read_text()  # 5 lines down
    assert "Subject: [PATCH] [dynamo] Raise one graph break" in new.read_text()
    assert (
        "hunks moved in torch/_dynamo/side_effects.py" in (dest / "HEADER").read_text()
    )
    assert (dest / "series").read_text() == f"# Patches for torch 2.15.0\n{new.name}\n"


def test_conflict_stops_and_continue_finishes(
    project: Path, tmp_path: Path, capsys
) -> None:
    clashing = "".join(BASE).replace("line 20\n", "line 20 changed upstream\n")
    dest = tmp_path / "dest"
    fetch = Releases({"2.14.1": "".join(BASE), "2.15.0": clashing})
    assert run(project, fetch, "2.14.1", "2.15.0", "--dest", str(dest)) == 1
    err = capsys.readouterr().err
    assert f"in: {FILE}" in err
    assert "<<<<<<<" in err and "line 20 changed upstream" in err
    assert "make rebase-continue FROM=2.14.1 TO=2.15.0" in err
    assert not dest.exists()
    assert not (project / "torch-2.15.0").exists()

    work = project.parent / "build" / "torch-2.14.1-to-2.15.0"
    # Continuing before the conflict is resolved refuses, writing nothing.
    assert run(project, fetch, "2.14.1", "2.15.0", "--continue") == 1
    assert "still has conflict markers" in capsys.readouterr().err
    assert not dest.exists()

    (work / FILE).write_text(
        "".join(BASE).replace("line 20\n", "line 20 changed upstream, patched\n")
    )
    assert run(project, fetch, "2.14.1", "2.15.0", "--continue") == 0
    assert changed(dest) == [
        f"diff --git a/{FILE} b/{FILE}",
        "-line 20 changed upstream",
        "+line 20 changed upstream, patched",
    ]
    header = (dest / "HEADER").read_text()
    assert "changed lines differ from torch-2.14.1's" in header
    assert f"conflicts resolved by hand in {FILE} ([dynamo] Raise" in header


def test_new_series_in_place(project: Path) -> None:
    fetch = Releases({"2.14.1": "".join(BASE), "2.15.0": "".join(BASE)})
    assert run(project, fetch, "2.14.1", "2.15.0", "--no-prove") == 0
    new = project / "torch-2.15.0"
    assert (new / "releases").read_text().splitlines()[-1] == "2.15.0"
    assert "Rebased-From: torch-2.14.1" in (new / "HEADER").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (("2.14.1", "2.x"), "TO='2.x' is not a release like 2.15.0"),
        (("2.99.0", "2.15.0"), "FROM='2.99.0' names no series (have: 2.14.1)"),
        (("2.14.1", "2.16.0"), "torch 2.16.0: pip found no wheel of it"),
    ],
)
def test_bad_request_is_one_line_and_writes_nothing(
    project: Path, tmp_path: Path, capsys, argv, message
) -> None:
    before = sorted(p for p in tmp_path.rglob("*") if "build" not in p.parts)
    dest = tmp_path / "dest"
    code = run(project, Releases({"2.14.1": "".join(BASE)}), *argv, "--dest", str(dest))
    assert code == 1
    err = capsys.readouterr().err
    assert err == f"rebase: error: {message}\n"
    assert sorted(p for p in tmp_path.rglob("*") if "build" not in p.parts) == before


def test_in_place_carries_all_but_the_patches_its_header_drops(
    project: Path, capsys
) -> None:
    # 2.15.0 has 2.14.1's patch and a test commit, which 2.14.1's HEADER
    # says it does not carry; regenerating 2.14.1 from it replays the other
    # and keeps 2.14.1's own files.
    before, after = "".join(BASE), "".join(BASE).replace("line 20\n", "line 20, v2\n")
    newer = make_series(project, "2.15.0", before, after)
    (test_patch,) = newer.glob("*.patch")
    extra = newer / "0002-dynamo-Test-it.patch"
    extra.write_text(
        test_patch.read_text()
        .replace("Raise one graph break", "Test it")
        .replace(f"a/{FILE}", "a/test/t.py")
        .replace(f"b/{FILE}", "b/test/t.py")
    )
    (newer / "series").write_text(f"{test_patch.name}\n{extra.name}\n")
    (project / "torch-2.14.1" / "tests").write_text("fix_tests/test_own.py\n")
    (project / "torch-2.14.1" / "HEADER").write_text(
        "Description: x\nNot-Carried: [dynamo] Test it\n"
    )
    (project.parent / "fix_tests").mkdir()
    (project.parent / "fix_tests" / "test_own.py").write_text("")
    fetch = Releases({"2.15.0": before, "2.14.1": before})
    assert run(project, fetch, "2.15.0", "2.14.1", "--no-prove") == 0
    assert (
        "not carried to torch-2.14.1: 0002-dynamo-Test-it.patch"
        in capsys.readouterr().out
    )
    (patch,) = (project / "torch-2.14.1").glob("*.patch")
    assert "+line 20, v2" in patch.read_text()
    assert (project / "torch-2.14.1" / "tests").read_text() == "fix_tests/test_own.py\n"


def test_own_patches_are_kept_after_the_replayed_ones(project: Path) -> None:
    # 2.14.1 carries a patch of its own after the one it shares with 2.15.0;
    # regenerating it from 2.15.0 replays the shared one and re-applies its
    # own on top, with git's three-way merge.
    before = "".join(BASE)
    newer = make_series(
        project, "2.15.0", before, before.replace("line 20\n", "line 20, v2\n")
    )
    older = project / "torch-2.14.1"
    (shared,) = older.glob("*.patch")
    repo = project.parent / "made-2.14.1"
    (repo / FILE).write_text(
        before.replace("line 20\n", "line 20, patched\n").replace(
            "line 2\n", "line 2, own\n"
        )
    )
    git = GIT
    subprocess.run([*git, "commit", "-qam", "[dynamo] Own"], cwd=repo, check=True)
    subprocess.run(
        [*git, "format-patch", "-q", "--zero-commit", "--start-number=2", "-o",
         str(older), "-1"],
        cwd=repo,
        check=True,
    )  # fmt: skip
    (own,) = (p for p in older.glob("*.patch") if p != shared)
    (older / "series").write_text(f"{shared.name}\n{own.name}\n")
    fetch = Releases({"2.15.0": before, "2.14.1": before})
    assert run(project, fetch, "2.15.0", "2.14.1", "--no-prove") == 0
    first, second = sorted(older.glob("*.patch"))
    assert "+line 20, v2" in first.read_text()
    assert "Subject: [PATCH 2/2] [dynamo] Own" in second.read_text()
    assert "+line 2, own" in second.read_text()
    assert newer.is_dir()


def test_a_recorded_resolution_is_replayed(project: Path) -> None:
    # 2.13.0's line 20 differs from 2.15.0's: the first replay stops on a
    # conflict, which the maintainer resolves; the resolution is recorded in
    # the series (rerere/), and the next replay takes it without stopping.
    before = "".join(BASE)
    make_series(project, "2.15.0", before, before.replace("line 20\n", "line 20, v2\n"))
    older = before.replace("line 20\n", "line 20 of 2.13\n")
    fetch = Releases({"2.15.0": before, "2.13.0": older})
    assert run(project, fetch, "2.15.0", "2.13.0", "--no-prove") == 1
    work = project.parent / "build" / "torch-2.15.0-to-2.13.0"
    (work / FILE).write_text(
        older.replace("line 20 of 2.13\n", "line 20 of 2.13, v2\n")
    )
    subprocess.run(["git", "add", FILE], cwd=work, check=True)
    assert run(project, fetch, "--continue", "2.15.0", "2.13.0") == 0
    series = project / "torch-2.13.0"
    # Recorded as two small diffs, not as copies of the file.
    (entry,) = (series / rebase.RERERE).iterdir()
    assert sorted(p.name for p in entry.iterdir()) == [
        "postimage.diff",
        "preimage.diff",
    ]
    for diff in entry.iterdir():
        assert "line 10\n" not in diff.read_text()  # far from the conflict
    (first,) = series.glob("*.patch")
    made = first.read_text()
    assert run(project, fetch, "2.15.0", "2.13.0", "--no-prove") == 0
    (again,) = series.glob("*.patch")
    assert again.read_text() == made
    # A conflict that changed is not resolved by the old resolution.
    fetch = Releases({"2.15.0": before, "2.13.0": older.replace("2.13", "2.13.1")})
    assert run(project, fetch, "2.15.0", "2.13.0", "--no-prove") == 1


def test_a_patch_not_carried_may_be_context_of_a_later_one(project: Path) -> None:
    # 2.15.0's second patch changes a line whose context holds the line its
    # first patch changes, which 2.14.1 does not carry: the second does not
    # apply on the base alone, so the replay applies both and drops the first.
    before = "".join(BASE)
    first = before.replace("line 20\n", "line 20, v2\n")
    second = first.replace("line 23\n", "line 23, v2\n")
    newer = make_series(project, "2.15.0", before, first)
    repo = project.parent / "made-2.15.0"
    (repo / FILE).write_text(second)
    git = GIT
    subprocess.run(
        [*git, "commit", "-qam", "[dynamo] Then\n\nMore."], cwd=repo, check=True
    )
    subprocess.run(
        [*git, "format-patch", "-q", "--zero-commit", "-o", str(newer), "-1"],
        cwd=repo,
        check=True,
    )
    names = sorted(p.name for p in newer.glob("*.patch"))
    (newer / "series").write_text("\n".join(names) + "\n")
    (project / "torch-2.14.1" / "HEADER").write_text(
        "Description: x\nNot-Carried: [dynamo] Raise one graph break\n"
    )
    (project / "torch-2.14.1" / "series").write_text("# none yet\n")
    for patch in (project / "torch-2.14.1").glob("*.patch"):
        patch.unlink()
    fetch = Releases({"2.15.0": before, "2.14.1": before})
    assert run(project, fetch, "2.15.0", "2.14.1", "--no-prove") == 0
    (patch,) = (project / "torch-2.14.1").glob("*.patch")
    assert "+line 23, v2" in patch.read_text()
    assert "+line 20, v2" not in patch.read_text()


def test_series_check_fails_once_the_head_is_edited_by_hand(project: Path) -> None:
    # make series-check: a derived series equals the replay of its parent,
    # until a hunk of the parent (an era head) is changed by hand.
    from tools import series_check

    fetch = Releases({"2.14.1": "".join(BASE), "2.15.0": "".join(["new\n"] * 5 + BASE)})
    assert run(project, fetch, "2.14.1", "2.15.0", "--no-prove") == 0
    assert series_check.parent(project / "torch-2.15.0") == "2.14.1"
    build = project.parent / "build"
    assert series_check.check("2.15.0", "2.14.1", project, fetch, build) == []
    (head,) = (project / "torch-2.14.1").glob("*.patch")
    head.write_text(head.read_text().replace("+line 20, patched", "+line 20, by hand"))
    assert series_check.check("2.15.0", "2.14.1", project, fetch, build) == [
        f"{head.name} differs from its replay"
    ]
