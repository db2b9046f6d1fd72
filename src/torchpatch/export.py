"""One upstream patch: the whole series as a single mail.

The result is a `git format-patch` mail that `git apply` and `git am` take
on a PyTorch checkout of the series' release. Its message is the first
patch's (a series of several lists the others' subjects and bodies after
it), its diff the series' diffs in order: a file that several patches touch
gets one section per patch, which git applies in order. The test files the
series' own commits create (the pull request's) come with them.
"""

from __future__ import annotations

import re

from torchpatch import git
from torchpatch.errors import MalformedSeries
from torchpatch.series import Patch, Series

_DIFFSTAT_SEPARATOR = b"\n---\n"
_SIGNATURE = re.compile(rb"\n-- \n[^\n]*\n*\Z")
_NUMBERED_SUBJECT = re.compile(rb"^Subject: \[PATCH [^\]]*\]", re.MULTILINE)


def build(series: Series, extra: bytes = b"") -> bytes:
    """The upstream patch, with extra's diff sections after the series'."""
    if not series.patches:
        raise MalformedSeries(f"{series.directory} has no patches to export")
    parts = [_split(patch) for patch in series.patches]
    header = _NUMBERED_SUBJECT.sub(b"Subject: [PATCH]", parts[0][0], count=1)
    for (_, extra_message, _), patch in zip(parts[1:], series.patches[1:]):
        header += b"\n" + patch.subject.encode() + b"\n\n" + extra_message
    diff = b"".join(d for _, _, d in parts) + extra
    stat = git.diffstat(diff)
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
