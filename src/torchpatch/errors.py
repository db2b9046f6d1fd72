"""Refusals. Each is raised before anything on disk has changed, except
WrittenButNotVerified, whose message says what was written and how to
recover. Every message is one line: the command line prints it after
"torchpatch: error: " and exits with 1."""

from __future__ import annotations


class TorchPatchError(Exception):
    """A refusal whose message tells the user what is wrong and what to do."""


class TorchNotFound(TorchPatchError):
    pass


class UnsupportedVersion(TorchPatchError):
    pass


class MalformedSeries(TorchPatchError):
    pass


class LocallyModified(TorchPatchError):
    pass


class PatchDoesNotApply(TorchPatchError):
    pass


class NotWritable(TorchPatchError):
    pass


class GitNotFound(TorchPatchError):
    pass


class NotASourceTree(TorchPatchError):
    pass


class GitFailed(TorchPatchError):
    pass


class WrittenButNotVerified(TorchPatchError):
    pass
