"""tools/pr.py's test plan from the records the checks before it write (no
torch: the records are made here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools import pr


def stack_check(
    tmp_path: Path, runs: list[dict[str, Any]], problems: list[str]
) -> None:
    (tmp_path / "stack-check").mkdir()
    record = {"torch": "2.15.0", "runs": runs, "problems": problems}
    (tmp_path / "stack-check" / "results.json").write_text(json.dumps(record))


def run(
    state: str, file: str, driver: str, tests: list[str], passed: int, failed: int
) -> dict[str, Any]:
    """A record of make stack-check's: file's tests, run through driver."""
    names = ("file", "driver", "tests", "state", "passed", "failed")
    record = dict(zip(names, (file, driver, tests, state, passed, failed)))
    return {"commit": 2, "subject": "s", **record}


@pytest.fixture(autouse=True)
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pr, "BUILD", tmp_path)
    monkeypatch.setattr(pr, "ROOT", tmp_path.parent)


def test_a_pr_s_tests_before_and_after_it(tmp_path: Path) -> None:
    part = "test/dynamo/_test_misc_part4.py"
    misc = "test/dynamo/test_misc.py"  # the driver that imports part
    mine = "test/dynamo/test_hop_mutation.py"
    runs = [
        run("before", part, misc, ["test_map_side_effects"], 0, 1),
        run("after", part, misc, ["test_map_side_effects"], 1, 0),
        run("before", mine, mine, [], 5, 17),
        run("after", mine, mine, [], 22, 0),
    ]
    stack_check(tmp_path, runs, ["s: after: X::test_y failed"])
    assert pr.own_tests(2, "2.15.0") == [
        "- `pytest test/dynamo/test_misc.py -k 'test_map_side_effects'` (main's test "
        "file; a pytest plugin defines main's `TestCaseWithNestedGraphBreaks` for the "
        "release), torch 2.15.0: before this PR 0 passed, 1 failed; with this PR 1 "
        "passed, 0 failed",
        "- `pytest test/dynamo/test_hop_mutation.py`, torch 2.15.0: before this PR 5 "
        "passed, 17 failed; with this PR 22 passed, 0 failed",
        "- `make stack-check` found: s: after: X::test_y failed",
    ]


def test_a_pr_the_last_stack_check_did_not_run_stops_it(tmp_path: Path) -> None:
    stack_check(
        tmp_path,
        [run("after", "test/dynamo/test_x.py", "test/dynamo/test_x.py", [], 1, 0)],
        [],
    )
    with pytest.raises(SystemExit, match="PR 3 is not in the last `make stack-check`"):
        pr.own_tests(3, "2.15.0")


def test_a_missing_record_names_the_target_that_writes_it() -> None:
    with pytest.raises(
        SystemExit, match="stack-check/results.json is missing: run `make stack-check`"
    ):
        pr.own_tests(1, "2.15.0")
