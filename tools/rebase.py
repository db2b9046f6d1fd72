"""Rebase a patch series onto another torch release, with git's three-way merge
(docs/maintaining.md, "Adding a release").

    python -m tools.rebase FROM TO [--dest DIR] [--no-prove]   # make rebase
    python -m tools.rebase --continue FROM TO                  # make rebase-continue
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.pins import new_pins
from tools.plumbing import BUILD, MAIN, ROOT, Failed, dep3, git, wheel_files
from tools.series_tests import TESTS_FILE
from torchpatch import series as series_
from torchpatch.errors import TorchPatchError

# In the scratch repository's .git: [DEST, prove]; the conflicts resolved.
STATE, RESOLVED = "torchpatch-rebase.json", "torchpatch-resolved"
RERERE, IMAGES = "rerere", ("preimage", "postimage")  # <hash>/<image>.diff
Fetch = Callable[[str, Sequence[str], Path], None]  # (release, paths, into)


@dataclass(frozen=True)
class Job:
    from_release: str
    to_release: str
    patches: Path  # patches/
    work: Path  # the scratch repository
    dest: Path | None = None  # where the series goes, if not to patches/torch-TO

    @property
    def target(self) -> Path:  # regenerated in place if it exists
        return self.patches / f"torch-{self.to_release}"

    @property
    def fields(self) -> dict[str, str]:  # its HEADER's; {} for a new series
        header = self.target / "HEADER"
        exists = header.is_file() and (self.target / series_.SERIES_FILE).is_file()
        return dep3(header.read_text()) if exists else {}


def wheel_fetch(release: str, paths: Sequence[str], into: Path) -> None:
    wheel_files(release, set(paths).__contains__, into)


def plan(job: Job) -> tuple[series_.Series, list[series_.Patch], list[series_.Patch]]:
    """FROM's series, its patches but those Not-Carried, and TO's own patches."""
    found = series_.load_series(job.patches, job.from_release)
    if not (job.target / series_.SERIES_FILE).is_file():
        return found, list(found.patches), []
    dropped = set(map(str.strip, job.fields.get("Not-Carried", "").splitlines()))
    dropped -= {""}
    subjects = {p.subject for p in found.patches}
    if unknown := "; ".join(sorted(dropped - subjects)):
        raise Failed(f"{job.target}/HEADER: Not-Carried names no patch: {unknown}")
    theirs = series_.load_series(job.patches, job.to_release).patches
    kept = [p for p in theirs if p.subject not in subjects]
    if kept and list(theirs[-len(kept) :]) != kept:
        raise Failed(f"{job.target}: its own patches must come last")
    return found, [p for p in found.patches if p.subject not in dropped], kept


def write_tree(repo: Path, paths: Sequence[str], release: str, fetch: Fetch) -> None:
    """Commits the series' paths as release has them (its tests as main does)."""
    for path in paths:
        (repo / path).unlink(missing_ok=True)
        if not path.startswith("torch/") and (MAIN / path).is_file():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(MAIN / path, repo / path)
    fetch(release, [p for p in paths if p.startswith("torch/")], repo)
    git(repo, "add", "-A", "--", ".")
    git(repo, "commit", "-q", "--allow-empty", "-m", f"torch {release}")


def resolved(job: Job, *conflicts: str) -> list[str]:
    """The conflicts resolved in this replay, after adding conflicts."""
    with (job.work / ".git" / RESOLVED).open("a") as log:
        log.writelines(f"{line}\n" for line in conflicts)
    return (job.work / ".git" / RESOLVED).read_text().splitlines()


def load_resolutions(job: Job) -> None:
    """Puts TO's recorded resolutions, rebuilt on TO's files, in git's rr-cache."""
    for entry in sorted((job.target / RERERE).glob("*")):
        images = []
        for image in IMAGES:
            diff = str(entry / f"{image}.diff")
            if git(job.work, "apply", diff, check=False).returncode == 0:
                (path,) = git(job.work, "diff", "--name-only").stdout.split()
                images.append((job.work / path).read_text())
        git(job.work, "checkout", "-q", "--", ".")
        if len(images) < len(IMAGES):
            continue  # its conflict stops the replay
        cache = job.work / ".git" / "rr-cache" / entry.name
        cache.mkdir(parents=True)
        for image, text in zip(IMAGES, images):
            (cache / image).write_text(text)
            os.utime(cache / image, (0, 0))  # unused until git rerere touches it


def _unified(path: str, old: str, new: str) -> str:
    # One line of context: enough to apply to the exact file it was made on.
    lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    return "".join(difflib.unified_diff(*lines, f"a/{path}", f"b/{path}", n=1))


def save_resolutions(job: Job, into: Path) -> None:
    """Writes the resolutions used or recorded as diffs: TO's closest file to the
    conflict, the conflict to the resolution."""
    shutil.rmtree(into, ignore_errors=True)
    paths = git(job.work, "ls-tree", "-r", "--name-only", "onto").stdout.split()
    onto = {p: git(job.work, "show", f"onto:{p}").stdout for p in paths}
    cache = (job.work / ".git" / "rr-cache").glob("*/postimage")
    for postimage in sorted(p for p in cache if p.stat().st_mtime):  # used
        preimage = (postimage.parent / "preimage").read_text()
        diffs = {p: _unified(p, text, preimage) for p, text in onto.items()}
        path = min(diffs, key=lambda p: len(diffs[p]))
        entry = into / postimage.parent.name
        entry.mkdir(parents=True)
        (entry / "preimage.diff").write_text(diffs[path])
        post = _unified(path, preimage, postimage.read_text())
        (entry / "postimage.diff").write_text(post)


def unmerged(job: Job) -> list[str]:
    return git(job.work, "diff", "--name-only", "--diff-filter=U").stdout.split()


def conflicts(job: Job) -> str:
    """The conflicting files and their hunks, as git shows them; recorded."""
    files = unmerged(job)
    hunks = git(job.work, *(["diff", *files] if files else ["status", "--short"]))
    stopped = git(job.work, "log", "-1", "--format=%s", "REBASE_HEAD", check=False)
    subject = stopped.stdout.strip()
    resolved(job, *(f"{f} ({subject})" for f in files or ["?"]))
    where = ", ".join(files) or "(see git status)"
    return f"conflict replaying {subject!r}\nin: {where}\n{hunks.stdout}"


def am(job: Job, patches: Sequence[series_.Patch], *options: str) -> bool:
    paths = [str(p.path.resolve()) for p in patches]
    am = git(job.work, "am", "-q", "--keep-non-patch", *options, *paths, check=False)
    return am.returncode == 0


def replay_recorded(job: Job) -> bool:
    """Goes on past each conflict git rerere resolved; False at one it did not."""
    git_dir = job.work / ".git"
    for _ in range(1000):  # a bound, not a count: one turn a conflict
        if not any((git_dir / d).exists() for d in ("rebase-merge", "rebase-apply")):
            return True
        if unmerged(job):
            return False
        replayed = git(job.work, "rerere", "status").stdout.split()
        resolved(job, *(f"{path} (recorded)" for path in replayed))
        in_am = (git_dir / "rebase-apply" / "applying").exists()
        git(job.work, "am" if in_am else "rebase", "--continue", check=False)
    return False


def start(job: Job, fetch: Fetch) -> bool:
    """Makes the scratch repository and replays there; False on a conflict."""
    found, replayed, kept = plan(job)
    shutil.rmtree(job.work, ignore_errors=True)
    job.work.mkdir(parents=True)
    git(job.work, "init", "-q", "-b", "series")
    git(job.work, "config", "rerere.enabled", "true")  # resolved as they were before
    git(job.work, "config", "rerere.autoupdate", "true")
    paths = sorted({*found.files, *(f for p in kept for f in p.files)})
    write_tree(job.work, paths, job.from_release, fetch)
    git(job.work, "tag", "base")
    # FROM's series is applied whole, then each patch not carried is dropped,
    # newest first: the later ones' context may hold its lines.
    for patch in (p for p in found.patches if p not in replayed):
        print(f"rebase: not carried to torch-{job.to_release}: {patch.name}")
    applied = am(job, found.patches, "-3")
    commits = git(job.work, "rev-list", "--reverse", "base..series").stdout.split()
    for patch, commit in reversed(list(zip(found.patches, commits))):
        if patch not in replayed and applied:
            drop = ["rebase", "-q", "--onto", f"{commit}~", commit]
            applied = git(job.work, *drop, check=False).returncode == 0
    if not applied:
        raise Failed(
            f"patches/torch-{job.from_release} does not apply to torch "
            f"{job.from_release} without the patches it does not carry"
        )
    git(job.work, "checkout", "-q", "-b", "onto", "base")
    write_tree(job.work, paths, job.to_release, fetch)
    load_resolutions(job)
    git(job.work, "rebase", "-q", "--onto", "onto", "base", "series", check=False)
    return replay_recorded(job) and apply_own(job, kept)


def apply_own(job: Job, kept: Sequence[series_.Patch]) -> bool:
    """git am -3 of the own patches, on the blobs of TO's series as it is (branch
    as-it-is, the replay's files only); False on a conflict."""
    applied = git(job.work, "rev-parse", "-q", "--verify", "as-it-is", check=False)
    if not kept or applied.returncode == 0:
        return True
    git(job.work, "checkout", "-q", "-b", "as-it-is", "onto")
    tracked = git(job.work, "ls-files").stdout.split()
    theirs = series_.load_series(job.patches, job.to_release).patches
    if not am(job, theirs, *(f"--include={path}" for path in tracked)):
        raise Failed(f"{job.target} does not apply to torch {job.to_release}")
    git(job.work, "checkout", "-q", "series")
    am(job, kept, "-3")
    return replay_recorded(job)


def resume(job: Job) -> bool:
    """After the maintainer's resolution: False on a further conflict."""
    for path in unmerged(job):
        text = (job.work / path).read_text(errors="replace")
        if re.search(r"^(<<<<<<<|>>>>>>>) ", text, re.MULTILINE):
            raise Failed(f"{job.work / path} still has conflict markers")
        git(job.work, "add", "--", path)
    git(job.work, "rerere")  # records the resolution, for the next replay
    return replay_recorded(job) and apply_own(job, plan(job)[2])


def changed_lines(patch_text: str) -> list[str]:
    """A patch's `diff --git` lines and the lines it adds or removes."""
    diff = patch_text[patch_text.find("\ndiff --git ") :].split("\n-- \n")[0]
    lines = [x for x in diff.splitlines() if x.startswith(("diff --git ", "+", "-"))]
    return [x for x in lines if not x.startswith(("+++", "---"))]


def header(job: Job, replayed: Sequence[Path]) -> str:
    """A new series' DEP-3 HEADER; its Changes say how the replay differs."""
    old, new = job.from_release, job.to_release
    from_header = job.patches / f"torch-{old}" / "HEADER"
    fields = dep3(from_header.read_text()) if from_header.is_file() else {}
    differ = git(job.work, "diff", "--name-only", "base", "onto").stdout.split()
    moved = ", ".join(differ)
    _, carried, kept = plan(job)
    before = [x for p in [*carried, *kept] for x in changed_lines(p.path.read_text())]
    after = [x for p in replayed for x in changed_lines(p.read_text())]
    by_hand = ", ".join(resolved(job))
    by_hand = f"; conflicts resolved by hand in {by_hand}" if by_hand else ""
    if not moved:
        changes = f"none: the files the series touches are byte-identical in torch {old} and {new}"
    elif before == after:
        changes = f"the same changed lines; hunks moved in {moved}{by_hand}"
    else:
        changes = (
            f"changed lines differ from torch-{old}'s{by_hand} "
            f"(bases differ in {moved}): say how"
        )
    return (
        f"Description: {fields.get('Description', f'the fix for torch {new}')}"
        f"\nOrigin: vendor, rebased from patches/torch-{old} by `make rebase FROM={old} TO={new}`"
        f"\nBug: {fields.get('Bug', 'https://github.com/pytorch/pytorch/issues/126355')}"
        f"\nForwarded: {fields.get('Forwarded', 'no')}\nRebased-From: torch-{old}"
        f"\nChanges: {changes}\nLast-Update: {datetime.date.today().isoformat()}\n"
    )


def finish(job: Job) -> None:
    """Writes the series to DEST or patches/torch-TO; a new one with FROM's tests,
    its release and a HEADER."""
    target = job.dest or job.target
    old = job.patches / f"torch-{job.from_release}"
    existing = (target / series_.SERIES_FILE).is_file()
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.glob("*.patch"):
        stale.unlink()
    # `Carried-Tests: none`: the series keeps only the torch/ part of FROM's.
    no_tests = job.fields.get("Carried-Tests", "").startswith("none")
    to_target = ["format-patch", "-q", "--zero-commit", "-o", str(target)]
    git(job.work, *to_target, "onto..series", *(["--", "torch"] if no_tests else []))
    patches = sorted(target.glob("*.patch"))
    save_resolutions(job, target / RERERE)
    # A series that exists keeps its own comments; a new one takes FROM's.
    listing = (target if existing else old) / series_.SERIES_FILE
    comments = [c for c in listing.read_text().splitlines() if c.startswith("#")]
    names = [c.replace(job.from_release, job.to_release) for c in comments]
    names += [p.name for p in patches]
    (target / series_.SERIES_FILE).write_text("\n".join(names) + "\n")
    if not existing:
        if (old / TESTS_FILE).is_file():
            shutil.copyfile(old / TESTS_FILE, target / TESTS_FILE)
            print(f"rebase: {target.name} takes {old / TESTS_FILE}'s tests, unchanged")
        (target / series_.RELEASES_FILE).write_text(
            "# The releases this series is proven on (make test TORCH=<release>), "
            "one a line.\n" + job.to_release + "\n"
        )
        (target / "HEADER").write_text(header(job, patches))
    print(f"rebase: wrote {target} ({len(patches)} patches)")


def check_request(job: Job) -> None:
    """Refuses a request before anything is written."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", job.to_release):
        raise Failed(f"TO={job.to_release!r} is not a release like 2.15.0")
    if not (job.patches / f"torch-{job.from_release}" / series_.SERIES_FILE).is_file():
        names = (d.name.removeprefix("torch-") for d in job.patches.glob("torch-*"))
        have = ", ".join(sorted(names, key=series_.version_key))
        raise Failed(f"FROM={job.from_release!r} names no series (have: {have})")
    serving = series_.served_releases(job.patches).get(job.to_release, job.target)
    if job.dest is None and serving.name != job.target.name:
        raise Failed(f"torch {job.to_release} is served by {serving}: give DEST")
    if job.dest is not None and any(job.dest.glob("*.patch")):
        raise Failed(f"DEST={job.dest} already holds patches")


def run(
    argv: Sequence[str] | None = None,
    fetch: Fetch = wheel_fetch,
    pins: Callable[[str, str], str] = new_pins,
    patches: Path = ROOT / "patches",
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
    state = work / ".git" / STATE
    try:
        if args.resume and not state.is_file():
            raise Failed(f"no rebase to continue in {work}")
        if args.resume:
            args.dest, args.prove = json.loads(state.read_text())
        dest = Path(args.dest).resolve() if args.dest else None
        prove = args.prove and not dest
        job = Job(args.from_release, args.to_release, patches, work, dest)
        if not args.resume:
            check_request(job)
        clean = resume(job) if args.resume else start(job, fetch)
        state.write_text(json.dumps([dest and str(dest), prove]) + "\n")
        if not clean:
            print(
                f"{conflicts(job)}\nrebase: stopped on a conflict; nothing written. "
                f"Resolve it in {work} (edit the files, `git add` them), then run: "
                f"make rebase-continue FROM={job.from_release} TO={job.to_release}",
                file=sys.stderr,
            )
            return 1
        # Pins are resolved before anything is written (pip may refuse); a
        # series regenerated in place keeps its own.
        pins_file = patches.parent / "requirements" / f"torch-{job.to_release}.txt"
        pins_file = job.dest / "requirements.txt" if job.dest else pins_file
        keep = job.dest is None and pins_file.exists()
        requirements = None if keep else pins(job.from_release, job.to_release)
        finish(job)
        if requirements is not None:
            pins_file.write_text(requirements)
    except (Failed, TorchPatchError) as error:
        print(f"rebase: error: {error}", file=sys.stderr)
        return 1
    if prove:
        print(f"rebase: proving it: make test TORCH={job.to_release}")
        proof = subprocess.run(["make", "test", f"TORCH={job.to_release}"], cwd=ROOT)
        if proof.returncode != 0:
            print("rebase: its proof, with FROM's tests, failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(run())
