"""make demo's verdict: one error for every form and mode, patched, but for the
forms the release cannot trace even at the root, which keep Dynamo's own."""

from __future__ import annotations

from typing import Any

from tools.demo import one_error

FIX = "Can't inplace modify module params/buffers inside HigherOrderOp"
# Dynamo's own error for a __dict__ write at the root, in each mode (2.6.0's).
ROOT_ERRORS = {
    "0": "call_method GetAttrVariable(NNModuleVariable(), __dict__)",
    "1": "call_method GetAttrVariable(UnspecializedNNModuleVariable(M), __dict__)",
}


def error(message: str, kind: str = "AttributeMutationError") -> dict[str, Any]:
    return {"type": kind, "message": message, "untraced_at_root": False}


def root_error(mode: str, message: str = "") -> dict[str, Any]:
    text = message or ROOT_ERRORS[mode]
    return {"type": "Unsupported", "message": text, "untraced_at_root": True}


def run(patched_dict_write: dict[str, dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """2.6.0's demo: a `self.w += 1` and a `__dict__` write, in each mode;
    patched_dict_write: {mode: the patched error of the write}."""
    found = {}
    for mode in ROOT_ERRORS:
        w = error(f"{FIX}: attempted to set attribute 'w' of M")
        pristine_w = error("Mutating a variable", "Unsupported")
        found["pristine", mode] = {"w": pristine_w, "dict": root_error(mode)}
        found["patched", mode] = {"w": w, "dict": patched_dict_write[mode]}
    return found


def test_a_form_untraced_at_the_root_keeps_its_error_in_each_mode() -> None:
    ok, verdict = one_error(run({mode: root_error(mode) for mode in ROOT_ERRORS}))
    assert ok, verdict
    assert verdict == (
        f"one error for every form and mode: AttributeMutationError {FIX}; "
        "as at the root, Dynamo's own for: dict"
    )


def test_a_form_untraced_at_the_root_that_changes_fails() -> None:
    # The write's patched error in mode 1 is mode 0's: not what mode 1's root gives.
    swapped = {mode: root_error(mode, ROOT_ERRORS["0"]) for mode in ROOT_ERRORS}
    assert one_error(run(swapped)) == (
        False,
        "'dict' is not traced at the root, yet changed",
    )


def test_two_kinds_of_error_patched_fail() -> None:
    other = {mode: error("something else") for mode in ROOT_ERRORS}
    assert one_error(run(other)) == (False, "the forms or modes still differ")
