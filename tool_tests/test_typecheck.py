"""tools/typecheck.py's count of mypy errors, by file and message (no torch, no
mypy run)."""

from __future__ import annotations

from tools.typecheck import mypy_errors

PRISTINE = """\
torch/_dynamo/side_effects.py:10:5: error: Missing return statement  [return]
torch/_dynamo/side_effects.py:20:9: note: See https://mypy.rtfd.io
torch/_dynamo/utils.py:7:1: error: Name "x" is not defined  [name-defined]
Found 2 errors in 2 files (checked 3 source files)
"""
# The same errors, on lines the patch moved, one of them twice, and a new one.
PATCHED = """\
torch/_dynamo/side_effects.py:14:5: error: Missing return statement  [return]
torch/_dynamo/side_effects.py:40:5: error: Missing return statement  [return]
torch/_dynamo/side_effects.py:52:3: error: Unused "type: ignore" comment  [unused-ignore]
torch/_dynamo/utils.py:7:1: error: Name "x" is not defined  [name-defined]
"""


def test_an_error_a_patch_moves_is_not_new_a_second_one_is() -> None:
    new = mypy_errors(PATCHED) - mypy_errors(PRISTINE)
    side_effects = "torch/_dynamo/side_effects.py"
    assert dict(new) == {
        (side_effects, "Missing return statement  [return]"): 1,
        (side_effects, 'Unused "type: ignore" comment  [unused-ignore]'): 1,
    }
    assert (
        sum(mypy_errors(PRISTINE).values()) == 2
    )  # notes and the summary are not errors
