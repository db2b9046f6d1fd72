"""One upstream patch: the whole series plus this project's new test files.

The result is a single `git format-patch` mail that `git apply` and `git am`
take on a PyTorch checkout of the series' release. Its message is the first
patch's (a series of several lists the others' subjects and bodies after
it), its diff the series' diffs followed by a new-file section for every
test file the series exports (the `FILE -> PATH` lines of its `tests` file),
created at PATH. A file that several patches touch gets one section per
patch; git applies them in order.

A series whose test commit already creates PATH (so that `git am` of the
series gives the whole pull request) carries that file, which later commits
may extend: export adds no second section, and refuses a series that leaves
PATH unlike FILE. `refresh_carried` rewrites the carried copy from FILE
where one commit alone writes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from torchpatch import git
from torchpatch.errors import MalformedSeries
from torchpatch.series import Patch, Series, TestFile

_DIFFSTAT_SEPARATOR = b"\n---\n"
_SIGNATURE = re.compile(rb"\n-- \n[^\n]*\n*\Z")
_NUMBERED_SUBJECT = re.compile(rb"^Subject: \[PATCH [^\]]*\]", re.MULTILINE)


def build(series: Series, data_root: Path) -> bytes:
    """The upstream patch; data_root holds the series' test files."""
    if not series.patches:
        raise MalformedSeries(f"{series.directory} has no patches to export")
    parts = [_split(patch) for patch in series.patches]
    header = _NUMBERED_SUBJECT.sub(b"Subject: [PATCH]", parts[0][0], count=1)
    for (_, extra_message, _), patch in zip(parts[1:], series.patches[1:]):
        header += b"\n" + patch.subject.encode() + b"\n\n" + extra_message
    diff = b"".join(d for _, _, d in parts)
    stale = stale_carried(series, data_root)
    if stale:
        raise MalformedSeries(stale[0])
    for test in series.exported_tests:
        if _carrier(series, test) is None:
            diff += git.new_file_diff(data_root / test.path, test.exported_as)
    stat = git.diffstat(diff, cwd=data_root)
    signature = _SIGNATURE.search(series.patches[0].read())
    trailer = signature.group(0).lstrip(b"\n") if signature else b""
    return header + b"---\n" + stat + b"\n" + diff + trailer


def _split(patch: Patch) -> tuple[bytes, bytes, bytes]:
    """(headers and message, message body alone, diff sections) of a patch."""
    text = patch.read()
    text = _SIGNATURE.sub(b"\n", text)
    head, sep, rest = text.partition(_DIFFSTAT_SEPARATOR)
    diff_start = rest.find(b"diff --git ")
    if not sep or diff_start < 0:
        raise MalformedSeries(f"{patch.path}: no '---' line before its diff")
    _, _, body = head.partition(b"\n\n")
    return head + b"\n", body.strip() + b"\n", rest[diff_start:]


def stale_carried(series: Series, data_root: Path) -> list[str]:
    """A line for each carried test file whose copy in its patch is not FILE."""
    return [
        f"{patch.path} creates {test.upstream} unlike {test.path}; "
        f"rewrite it with `python -m tools.carried_tests`"
        for test, patch in _stale(series, data_root)
    ]


def refresh_carried(series: Series, data_root: Path) -> list[Path]:
    """Rewrite each carried test file's section from FILE; the patches changed."""
    changed = []
    for test, patch in _stale(series, data_root):
        if sum(test.exported_as in p.files for p in series.patches) > 1:
            raise MalformedSeries(
                f"{test.exported_as} is written by several patches of "
                f"{series.directory}: edit the stack, then copy its text to {test.path}"
            )
        text = patch.read()
        head, sep, rest = text.partition(_DIFFSTAT_SEPARATOR)
        start, end = _section(rest, test.exported_as)
        new_rest = (
            rest[:start]
            + git.new_file_diff(data_root / test.path, test.exported_as)
            + rest[end:]
        )
        diff_start = new_rest.find(b"diff --git ")
        signature = _SIGNATURE.search(new_rest)
        diff_end = signature.start() + 1 if signature else len(new_rest)
        diff = new_rest[diff_start:diff_end]
        stat = git.diffstat(diff, cwd=data_root)
        patch.path.write_bytes(head + sep + stat + b"\n" + new_rest[diff_start:])
        changed.append(patch.path)
    return changed


def _stale(series: Series, data_root: Path) -> Iterator[tuple[TestFile, Patch]]:
    """Each carried test file whose copy in its patch is not FILE, and the patch."""
    for test in series.exported_tests:
        patch = _carrier(series, test)
        if patch is not None and (
            _carried_text(series, test, patch) != (data_root / test.path).read_bytes()
        ):
            yield test, patch


def _carried_text(series: Series, test: TestFile, carrier: Patch) -> bytes | None:
    """What the series leaves at test's upstream path: the file its carrier
    creates, with the changes of the patches after it."""
    created = _added_file(carrier.read(), test.exported_as)
    later = series.patches[series.patches.index(carrier) + 1 :]
    if created is None or not any(test.exported_as in p.files for p in later):
        return created
    with git.scratch_dir() as tmp:
        path = Path(tmp) / test.exported_as
        path.parent.mkdir(parents=True)
        path.write_bytes(created)
        for patch in later:
            if test.exported_as in patch.files:
                git.apply(patch.path, Path(tmp), [test.exported_as])
        return path.read_bytes()


def _carrier(series: Series, test: TestFile) -> Patch | None:
    """The patch of the series that creates test's upstream path, if one does."""
    for patch in series.patches:
        if test.upstream in patch.files:
            return patch
    return None


def _section(rest: bytes, relpath: str) -> tuple[int, int]:
    """Where the `diff --git` section of relpath starts and ends in rest."""
    start = rest.find(f"diff --git a/{relpath} b/{relpath}\n".encode())
    if start < 0:
        raise MalformedSeries(f"no diff section for {relpath}")
    following = rest.find(b"\ndiff --git ", start)
    signature = _SIGNATURE.search(rest, start)
    ends = [e + 1 for e in (following,) if e >= 0]
    ends += [signature.start() + 1] if signature else []
    return start, min(ends, default=len(rest))


def _added_file(text: bytes, relpath: str) -> bytes | None:
    """The bytes a patch's new-file section for relpath creates."""
    _, _, rest = text.partition(_DIFFSTAT_SEPARATOR)
    try:
        start, end = _section(rest, relpath)
    except MalformedSeries:
        return None
    section = rest[start:end].split(b"\n@@ ", 1)
    if len(section) != 2 or b"\nnew file mode " not in section[0]:
        return None
    lines = section[1].split(b"\n")[1:]
    out = []
    for line in lines:
        if line.startswith(b"+"):
            out.append(line[1:] + b"\n")
        elif line.startswith(b"\\") and out:
            out[-1] = out[-1][:-1]  # \ No newline at end of file
    return b"".join(out)
