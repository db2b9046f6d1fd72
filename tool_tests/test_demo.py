"""make demo's verdict: one error for every form and mode, patched, but for the
forms the release cannot trace even at the root, which keep Dynamo's own."""

from __future__ import annotations

from typing import Any

from tools.demo import one_error

FIX = "Can't inplace modify module params/buffers inside HigherOrderOp"
ROOT_ERROR = {"type": "Unsupported", "message": "call_method GetAttrVariable"}


def error(message: str, kind: str = "AttributeMutationError") -> dict[str, Any]:
    return {"type": kind, "message": message, "untraced_at_root": False}


def run(patched_dict_write: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """2.6.0's demo in one mode: a `self.w += 1` and a `__dict__` write."""
    untraced = {**ROOT_ERROR, "untraced_at_root": True}
    pristine = {"w": error("Mutating a variable", "Unsupported"), "dict": untraced}
    patched = {"w": error(f"{FIX}: attempted to set attribute 'w' of M")}
    return {
        ("pristine", "0"): pristine,
        ("patched", "0"): patched | {"dict": patched_dict_write},
    }


def test_a_form_untraced_at_the_root_keeps_its_error() -> None:
    ok, verdict = one_error(run({**ROOT_ERROR, "untraced_at_root": True}))
    assert ok, verdict
    assert verdict == (
        f"one error for every form and mode: AttributeMutationError {FIX} "
        "(1 not traced at the root keep their error)"
    )


def test_a_form_untraced_at_the_root_that_changes_fails() -> None:
    changed = {**ROOT_ERROR, "message": "other", "untraced_at_root": True}
    assert one_error(run(changed)) == (
        False,
        "'dict' is not traced at the root, yet changed",
    )


def test_two_kinds_of_error_patched_fail() -> None:
    assert one_error(run(error("something else"))) == (
        False,
        "the forms or modes still differ",
    )
