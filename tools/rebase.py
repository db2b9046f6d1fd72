"""Rebase a patch series onto another torch release, with git's three-way merge.

    python -m tools.rebase FROM TO [--dest DIR] [--no-prove]   # make rebase
    python -m tools.rebase --continue FROM TO                  # make rebase-continue

FROM names a series (patches/torch-FROM/, made against release FROM), TO a
release. In a scratch git repository (build/rebase/torch-FROM-to-TO/) it
commits the files the series touches as FROM's wheel has them (test files
as ../shared/upstream/pytorch-main has them), applies the series there with
`git am -3`, commits the same files as TO's wheel has them on top of that
base, and replays the series onto it with `git rebase`. Then it writes
patches/torch-TO/ (`git format-patch` files, `series`, `tests`, `releases`
and a DEP-3 `HEADER`) and requirements/torch-TO.txt, and proves the new
series with `make test TORCH=TO`.

On a conflict it stops, shows the conflicting hunks and leaves the scratch
repository for the maintainer to resolve (edit, `git add`), writing nothing
under patches/ or DEST; `--continue` then finishes the replay and writes the
series. With --dest the series goes to DEST (its requirements to
DEST/requirements.txt) and is not proven; --no-prove skips only the proof.

A series that already exists at patches/torch-TO/ is regenerated in place:
its patches and `series` are rewritten, its `tests`, `releases`, `HEADER`
and requirements kept. A new series is proven with FROM's tests: a release
that needs a test file of its own (as 2.11 and 2.12 do) fails the proof, and
the proof says so.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.pins import PinError, dry_run
from tools.plumbing import (
    BUILD,
    MAIN as UPSTREAM_TESTS,
    ROOT,
    Failed,
    dep3,
    git,
    wheel_files,
)
from tools.series_tests import TESTS_FILE
from torchpatch import series as series_
from torchpatch.errors import TorchPatchError

STATE = "torchpatch-rebase.json"  # in the scratch repository's .git
# A series' recorded resolutions: for each of git's rr-cache entries,
# <hash>/preimage.diff (the conflicted file, from TO's file) and
# <hash>/postimage.diff (its resolution, from the conflicted file).
RERERE = "rerere"
IMAGES = ("preimage", "postimage")
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")

# (release, paths under torch/, into): writes into/<path> for each path the
# release's wheel has.
Fetch = Callable[[str, Sequence[str], Path], None]


class RebaseError(Exception):
    """A refusal: one line, nothing written."""


@dataclass(frozen=True)
class Job:
    from_release: str
    to_release: str
    patches_root: Path
    work: Path  # the scratch repository
    dest: Path | None
    prove: bool
    # Replay only the patches the series at patches/torch-TO has, also with
    # a dest (tools/series_check.py compares the replay with that series).
    like_target: bool = False

    @property
    def from_dir(self) -> Path:
        return self.patches_root / f"torch-{self.from_release}"

    @property
    def to_dir(self) -> Path:
        return self.dest or self.patches_root / f"torch-{self.to_release}"

    def save(self, resolved: Sequence[str] = ()) -> None:
        state = {
            "from": self.from_release,
            "to": self.to_release,
            "dest": str(self.dest) if self.dest else None,
            "prove": self.prove,
            "resolved": list(resolved),
        }
        (self.work / ".git" / STATE).write_text(json.dumps(state) + "\n")

    def resolved(self) -> list[str]:
        """The conflicts the maintainer resolved: "file (patch subject)"."""
        state = json.loads((self.work / ".git" / STATE).read_text())
        return list(state["resolved"])

    @classmethod
    def load(cls, work: Path, patches_root: Path) -> Job:
        state_file = work / ".git" / STATE
        if not state_file.is_file():
            raise RebaseError(f"no rebase to continue in {work}")
        state = json.loads(state_file.read_text())
        return cls(
            state["from"],
            state["to"],
            patches_root,
            work,
            Path(state["dest"]) if state["dest"] else None,
            state["prove"],
        )


def has_wheel(release: str) -> bool:
    """Whether PyPI has a torch wheel of release for CPython 3.11, from its
    metadata (a dry run of pip), before any wheel is downloaded."""
    try:
        dry_run([f"torch=={release}"], "--no-deps")
    except PinError:
        return False
    return True


def wheel_fetch(release: str, paths: Sequence[str], into: Path) -> None:
    """Writes into/<path> for each path under torch/ that release's wheel has."""
    try:
        wheel_files(release, set(paths).__contains__, into)
    except Failed as error:
        raise RebaseError(str(error)) from None


def write_tree(repo: Path, paths: Sequence[str], release: str, fetch: Fetch) -> None:
    """The work tree holds exactly the series' paths as release has them."""
    for path in paths:
        (repo / path).unlink(missing_ok=True)
    wheel_paths = [p for p in paths if p.startswith("torch/")]
    fetch(release, wheel_paths, repo)
    for path in paths:
        upstream = UPSTREAM_TESTS / path
        if not path.startswith("torch/") and upstream.is_file():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(upstream, repo / path)
    git(repo, "add", "-A", "--", ".")
    git(repo, "commit", "-q", "--allow-empty", "-m", f"torch {release}")


def _unified(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
            n=1,  # context enough to apply to the exact file it was made on
        )
    )


def _patched(text: str, diff: str) -> str | None:
    """text, the file the diff names, with the diff applied (git apply,
    outside any repository); None where it does not apply."""
    path = re.search(r"^\+\+\+ b/(.+)$", diff, re.MULTILINE)
    if path is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / path[1]
        target.parent.mkdir(parents=True)
        target.write_text(text)
        applied = subprocess.run(
            ["git", "apply", "-"], cwd=tmp, input=diff, text=True, capture_output=True
        )
        return target.read_text() if applied.returncode == 0 else None


def load_resolutions(job: Job) -> None:
    """Puts TO's recorded resolutions into git's rr-cache, their images
    rebuilt from TO's files (the branch `onto`): a resolution that no longer
    applies is left out, and its conflict stops the replay."""
    recorded = job.patches_root / f"torch-{job.to_release}" / RERERE
    for entry in sorted(recorded.glob("*/preimage.diff")):
        pre_diff, post_diff = (
            (entry.parent / f"{image}.diff").read_text() for image in IMAGES
        )
        path = re.search(r"^--- a/(.+)$", pre_diff, re.MULTILINE)
        base = git(job.work, "show", f"onto:{path[1] if path else ''}", check=False)
        preimage = _patched(base.stdout, pre_diff) if base.returncode == 0 else None
        postimage = None if preimage is None else _patched(preimage, post_diff)
        if preimage is None or postimage is None:
            print(
                f"rebase: {entry.parent.name}: does not apply to torch {job.to_release}"
            )
            continue
        cache = job.work / ".git" / "rr-cache" / entry.parent.name
        cache.mkdir(parents=True)
        for image, text in zip(IMAGES, (preimage, postimage)):
            (cache / image).write_text(text)
            # git rerere touches a resolution it uses: those it does not are
            # left at the epoch, and are not written back.
            os.utime(cache / image, (0, 0))


def save_resolutions(job: Job, into: Path) -> None:
    """Writes the resolutions this replay used or recorded as diffs: the
    conflicted file from TO's file of the series that it is closest to, and
    the resolution from the conflicted file."""
    shutil.rmtree(into, ignore_errors=True)
    paths = git(job.work, "ls-tree", "-r", "--name-only", "onto").stdout.split()
    for postimage in sorted((job.work / ".git" / "rr-cache").glob("*/postimage")):
        if postimage.stat().st_mtime == 0:
            continue  # a recorded resolution this replay did not use
        preimage = (postimage.parent / "preimage").read_text()
        diffs = {
            path: _unified(path, git(job.work, "show", f"onto:{path}").stdout, preimage)
            for path in paths
        }
        path = min(diffs, key=lambda p: len(diffs[p]))
        entry = into / postimage.parent.name
        entry.mkdir(parents=True)
        (entry / "preimage.diff").write_text(diffs[path])
        (entry / "postimage.diff").write_text(
            _unified(path, preimage, postimage.read_text())
        )


def conflicts(job: Job) -> str:
    """The conflicting files and their hunks, as git shows them; recorded."""
    repo = job.work
    files = git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split()
    failed = git(repo, "status", "--short").stdout
    hunks = git(repo, "diff", *files).stdout if files else failed
    stopped = git(repo, "log", "-1", "--format=%s", "REBASE_HEAD", check=False)
    subject = stopped.stdout.strip()
    job.save(job.resolved() + [f"{f} ({subject})" for f in files or ["?"]])
    return f"conflict replaying {subject!r}\nin: {', '.join(files) or '(see git status)'}\n{hunks}"


def _in_place(job: Job) -> bool:
    """Whether the replay regenerates the series at patches/torch-TO."""
    target = job.patches_root / f"torch-{job.to_release}"
    return (job.dest is None or job.like_target) and (
        target / series_.SERIES_FILE
    ).is_file()


def not_carried(job: Job) -> set[str]:
    """The subjects of FROM's patches that the series at patches/torch-TO
    does not carry: its HEADER's Not-Carried field, one subject a line."""
    header_file = job.patches_root / f"torch-{job.to_release}" / "HEADER"
    if not _in_place(job) or not header_file.is_file():
        return set()
    value = dep3(header_file.read_text()).get("Not-Carried", "")
    return {line.strip() for line in value.splitlines() if line.strip()}


def carries_tests(job: Job) -> bool:
    """False when the series at patches/torch-TO keeps only the torch/ part
    of what it replays: its HEADER's `Carried-Tests: none` (2.12.1, which
    does not run the pull request's tests, and so not 2.11.0)."""
    header_file = job.patches_root / f"torch-{job.to_release}" / "HEADER"
    if not _in_place(job) or not header_file.is_file():
        return True
    value = dep3(header_file.read_text()).get("Carried-Tests", "")
    return not value.startswith("none")


def carried(job: Job, found: series_.Series) -> list[series_.Patch]:
    """FROM's patches to replay: every one but those that a series
    regenerated in place does not carry (2.15.0's test commit is not
    2.14.1's to carry: its HEADER's Not-Carried names it)."""
    dropped = not_carried(job)
    unknown = dropped - {p.subject for p in found.patches}
    if unknown:
        raise RebaseError(
            f"patches/torch-{job.to_release}/HEADER: Not-Carried names patches "
            f"that patches/torch-{job.from_release} does not have: "
            f"{'; '.join(sorted(unknown))}"
        )
    return [p for p in found.patches if p.subject not in dropped]


def own(job: Job, found: series_.Series) -> list[series_.Patch]:
    """The patches of a series regenerated in place that FROM does not have
    (2.12.1's taint of aliased intermediates, which 2.13 needs no patch
    for): kept, and applied after the replayed ones, where they must stand."""
    if not _in_place(job):
        return []
    theirs = series_.load_series(job.patches_root, job.to_release).patches
    subjects = {p.subject for p in found.patches}
    kept = [p for p in theirs if p.subject not in subjects]
    if kept and list(theirs[-len(kept) :]) != kept:
        raise RebaseError(
            f"patches/torch-{job.to_release} has patches that "
            f"patches/torch-{job.from_release} lacks before some it has: its "
            f"own patches must come last"
        )
    return kept


def start(job: Job, fetch: Fetch) -> bool:
    """Makes the scratch repository and replays; False on a conflict."""
    found = series_.load_series(job.patches_root, job.from_release)
    shutil.rmtree(job.work, ignore_errors=True)
    job.work.mkdir(parents=True)
    git(job.work, "init", "-q", "-b", "series")
    # Conflicts this replay had before are resolved as they were then.
    git(job.work, "config", "rerere.enabled", "true")
    git(job.work, "config", "rerere.autoupdate", "true")
    job.save()
    kept = own(job, found)
    paths = sorted({*found.files, *(f for p in kept for f in p.files)})
    write_tree(job.work, paths, job.from_release, fetch)
    git(job.work, "tag", "base")
    replayed = carried(job, found)
    for patch in found.patches:
        if patch not in replayed:
            print(
                f"rebase: not carried to torch-{job.to_release}: {patch.name} (it has none)"
            )
    # FROM's series is applied whole, then each patch not carried is dropped,
    # newest first: the later ones are replayed without it by git's
    # three-way merge (their context may hold its lines).
    patches = [str(p.path.resolve()) for p in found.patches]
    applied = git(job.work, "am", "-q", "-3", "--keep-non-patch", *patches, check=False)
    commits = git(job.work, "rev-list", "--reverse", "base..series").stdout.split()
    for patch, commit in reversed(list(zip(found.patches, commits))):
        if patch not in replayed and applied.returncode == 0:
            applied = git(
                job.work, "rebase", "-q", "--onto", f"{commit}~", commit, check=False
            )
    if applied.returncode != 0:
        raise RebaseError(
            f"patches/torch-{job.from_release} does not apply to its own base, "
            f"torch {job.from_release}'s files, without the patches "
            f"torch-{job.to_release} does not carry: {applied.stdout.strip()[-300:]}"
        )
    git(job.work, "checkout", "-q", "-b", "onto", "base")
    write_tree(job.work, paths, job.to_release, fetch)
    load_resolutions(job)
    git(job.work, "checkout", "-q", "series")
    rebased = git(job.work, "rebase", "-q", "--onto", "onto", "base", check=False)
    if not (rebased.returncode == 0 or replay_recorded(job)):
        return False
    return apply_own(job, kept)


def apply_own(job: Job, kept: Sequence[series_.Patch]) -> bool:
    """Applies the series' own patches after the replayed ones, with git's
    three-way merge: the blobs they were made on come from TO's series as it
    is, applied on a branch of its own. False on a conflict."""
    if not kept:
        return True
    series = series_.load_series(job.patches_root, job.to_release)
    git(job.work, "checkout", "-q", "-b", "as-it-is", "onto")
    # Only the files of the replay's tree: TO's series as it is may still
    # carry test hunks that FROM no longer has (Carried-Tests).
    tracked = git(job.work, "ls-files").stdout.split()
    git(
        job.work,
        "am",
        "-q",
        "--keep-non-patch",
        *(f"--include={path}" for path in tracked),
        *(str(p.path.resolve()) for p in series.patches),
    )
    git(job.work, "checkout", "-q", "series")
    paths = [str(p.path.resolve()) for p in kept]
    applied = git(job.work, "am", "-q", "-3", "--keep-non-patch", *paths, check=False)
    return applied.returncode == 0 or replay_recorded(job)


def rebasing(job: Job) -> bool:
    git_dir = job.work / ".git"
    return (git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists()


def _go_on(job: Job) -> None:
    """`git rebase --continue`, or `git am --continue` in an am."""
    am = (job.work / ".git" / "rebase-apply" / "applying").exists()
    git(job.work, "am" if am else "rebase", "--continue", check=False)


def replay_recorded(job: Job) -> bool:
    """Goes on past every conflict that a recorded resolution (git rerere)
    resolved; False at the first one it did not."""
    for _ in range(1000):  # a bound, not a count: one turn a conflict
        if not rebasing(job):
            return True
        if git(job.work, "diff", "--name-only", "--diff-filter=U").stdout.strip():
            return False
        for path in git(job.work, "rerere", "status").stdout.split():
            job.save(job.resolved() + [f"{path} (recorded)"])
        _go_on(job)
    return False


def resume(job: Job) -> bool:
    """After the maintainer's resolution: False on a further conflict."""
    unresolved = git(job.work, "diff", "--name-only", "--diff-filter=U").stdout
    for path in unresolved.split():
        text = (job.work / path).read_text(errors="replace")
        if re.search(r"^(<<<<<<<|>>>>>>>) ", text, re.MULTILINE):
            raise RebaseError(f"{job.work / path} still has conflict markers")
        git(job.work, "add", "--", path)
    git(job.work, "rerere")  # records the resolution, for the next replay
    if rebasing(job):
        _go_on(job)
        if not replay_recorded(job):
            return False
    started_own = git(job.work, "rev-parse", "-q", "--verify", "as-it-is", check=False)
    if started_own.returncode == 0:
        return True
    found = series_.load_series(job.patches_root, job.from_release)
    return apply_own(job, own(job, found))


def changed_lines(patch_text: str) -> list[str]:
    """The lines a patch adds or removes, without where it does it."""
    lines = []
    in_diff = False
    for line in patch_text.splitlines():
        if line == "-- ":  # format-patch's signature: the diff has ended
            break
        if line.startswith("diff --git "):
            in_diff = True
            lines.append(line)
        elif in_diff and line[:1] in "+-" and not line.startswith(("+++", "---")):
            lines.append(line)
    return lines


def describe_changes(job: Job, before: list[str], after: list[str]) -> str:
    same_base = not git(job.work, "diff", "--name-only", "base", "onto").stdout
    if same_base:
        return (
            f"none: the files the series touches are byte-identical in torch "
            f"{job.from_release} and {job.to_release}"
        )
    moved = git(job.work, "diff", "--name-only", "base", "onto").stdout.split()
    resolved = job.resolved()
    by_hand = (
        f"; conflicts resolved by hand in {', '.join(resolved)}" if resolved else ""
    )
    if before == after:
        return f"the same changed lines; hunks moved in {', '.join(moved)}{by_hand}"
    return (
        f"changed lines differ from torch-{job.from_release}'s{by_hand or ''} "
        f"(bases differ in {', '.join(moved)}): say how"
    )


def header(job: Job, changes: str) -> str:
    origin = job.from_dir / "HEADER"
    fields = dep3(origin.read_text()) if origin.is_file() else {}
    today = datetime.date.today().isoformat()
    return (
        f"Description: {fields.get('Description', 'the fix for torch ' + job.to_release)}"
        f"\nOrigin: vendor, rebased from patches/torch-{job.from_release} by "
        f"`make rebase FROM={job.from_release} TO={job.to_release}`"
        f"\nBug: {fields.get('Bug', 'https://github.com/pytorch/pytorch/issues/126355')}"
        f"\nForwarded: {fields.get('Forwarded', 'no')}"
        f"\nRebased-From: torch-{job.from_release}"
        f"\nChanges: {changes}"
        f"\nLast-Update: {today}\n"
    )


def finish(job: Job, requirements: str | None) -> Path:
    """Writes the replayed series to job.to_dir; returns it."""
    out = job.work / ".git" / "format-patch"
    shutil.rmtree(out, ignore_errors=True)
    paths = [] if carries_tests(job) else ["--", "torch"]
    git(job.work, "format-patch", "-q", "--zero-commit", "-o", str(out), "onto..series",
        *paths)  # fmt: skip
    patches = sorted(out.glob("*.patch"))
    found = series_.load_series(job.patches_root, job.from_release)
    before = [
        line
        for p in [*carried(job, found), *own(job, found)]
        for line in changed_lines(p.path.read_text())
    ]
    after = [line for p in patches for line in changed_lines(p.read_text())]
    changes = describe_changes(job, before, after)

    target = job.to_dir
    existing = (target / series_.SERIES_FILE).is_file()
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.patch"):
        old.unlink()
    for patch in patches:
        shutil.copyfile(patch, target / patch.name)
    save_resolutions(job, target / RERERE)
    # A series that exists keeps its own comments; a new one takes FROM's.
    listing = (target if existing else job.from_dir) / series_.SERIES_FILE
    comments = [
        line for line in listing.read_text().splitlines() if line.startswith("#")
    ]
    comments = [c.replace(job.from_release, job.to_release) for c in comments]
    (target / series_.SERIES_FILE).write_text(
        "\n".join(comments + [p.name for p in patches]) + "\n"
    )
    if not existing:
        tests = job.from_dir / TESTS_FILE
        if tests.is_file():
            shutil.copyfile(tests, target / TESTS_FILE)
            print(
                f"rebase: {target.name} takes {tests}'s tests, unchanged: a "
                f"release that needs a test file of its own fails their proof"
            )
        (target / series_.RELEASES_FILE).write_text(
            "# The releases this series is proven on (make test TORCH=<release>), "
            "one a line.\n" + job.to_release + "\n"
        )
        (target / "HEADER").write_text(header(job, changes))
    if requirements is not None:
        pins_file = job.dest / "requirements.txt" if job.dest else pins_path(job)
        pins_file.write_text(requirements)
    print(f"rebase: wrote {target} ({len(patches)} patches); changes: {changes}")
    return target


def pins_path(job: Job) -> Path:
    return ROOT / "requirements" / f"torch-{job.to_release}.txt"


def check_request(job: Job) -> None:
    """Refuses a request before anything is written."""
    if not _RELEASE.match(job.to_release):
        raise RebaseError(f"TO={job.to_release!r} is not a release like 2.15.0")
    if not (job.from_dir / series_.SERIES_FILE).is_file():
        have = ", ".join(
            sorted(
                (
                    d.name.removeprefix("torch-")
                    for d in job.patches_root.glob("torch-*")
                ),
                key=series_.version_key,
            )
        )
        raise RebaseError(f"FROM={job.from_release!r} names no series (have: {have})")
    if job.dest is None:
        served = series_.served_releases(job.patches_root)
        serving = served.get(job.to_release)
        if serving is not None and serving.name != f"torch-{job.to_release}":
            raise RebaseError(
                f"torch {job.to_release} is served by {serving}; rebase onto "
                f"its base release, or give DEST"
            )
    if job.dest is not None and any(job.dest.glob("*.patch")):
        raise RebaseError(f"DEST={job.dest} already holds patches")


def run(
    argv: Sequence[str] | None = None,
    fetch: Fetch = wheel_fetch,
    pins: Callable[[Job], str] | None = None,
    patches_root: Path = ROOT / "patches",
    build: Path = BUILD / "rebase",
) -> int:
    parser = argparse.ArgumentParser(prog="rebase", description=__doc__.split("\n")[0])
    parser.add_argument("from_release", metavar="FROM")
    parser.add_argument("to_release", metavar="TO")
    parser.add_argument("--dest", type=Path)
    parser.add_argument("--no-prove", dest="prove", action="store_false")
    parser.add_argument("--continue", dest="resume", action="store_true")
    args = parser.parse_args(argv)
    work = build / f"torch-{args.from_release}-to-{args.to_release}"
    dest = args.dest.resolve() if args.dest else None
    try:
        if args.resume:
            job = Job.load(work, patches_root)
            clean = resume(job)
        else:
            job = Job(
                args.from_release,
                args.to_release,
                patches_root,
                work,
                dest,
                args.prove and dest is None,
            )
            check_request(job)
            if fetch is wheel_fetch and not has_wheel(job.to_release):
                raise RebaseError(
                    f"torch {job.to_release}: pip found no wheel of it for CPython 3.11"
                )
            clean = start(job, fetch)
        if not clean:
            print(conflicts(job), file=sys.stderr)
            print(
                f"rebase: stopped on a conflict; nothing written. Resolve it in "
                f"{job.work} (edit the files, `git add` them), then run: make "
                f"rebase-continue FROM={job.from_release} TO={job.to_release}",
                file=sys.stderr,
            )
            return 1
        # Pins are resolved before anything is written: pip may refuse.
        keep = job.dest is None and pins_path(job).exists()
        finish(job, pins(job) if pins is not None and not keep else None)
    except (RebaseError, PinError, TorchPatchError) as error:
        print(f"rebase: error: {error}", file=sys.stderr)
        return 1
    if job.prove:
        print(f"rebase: proving it: make test TORCH={job.to_release}")
        proof = subprocess.run(["make", "test", f"TORCH={job.to_release}"], cwd=ROOT)
        if proof.returncode != 0:
            print(
                f"rebase: the series applies but its proof failed; it was proven "
                f"with {job.to_dir / TESTS_FILE}, which a release that "
                f"needs its own test file fails",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    from tools.pins import resolve_pins

    sys.exit(run(pins=resolve_pins))
