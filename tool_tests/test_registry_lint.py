"""tools/upstream_lint.py reads unimplemented() calls as upstream's lint does."""

from __future__ import annotations

import json
from pathlib import Path

from tools.upstream_lint import registry, registry_check

CALL = """
def f(name, hop):
    unimplemented(
        gb_type="nn.Module mutation in HigherOrderOp",
        context=f"attribute: {name}",
        explanation=f"Attempted to set '{name}' inside {hop}. "
        "Not allowed.",
        hints=[
            "Move it out of the "
            "HigherOrderOp.",
            *graph_break_hints.FUNDAMENTAL,
        ],
    )
"""
ENTRY = {
    "Gb_type": "nn.Module mutation in HigherOrderOp",
    "Context": "attribute: {name}",
    "Explanation": "Attempted to set '{name}' inside {hop}. Not allowed.",
    "Hints": ["Move it out of the ", "HigherOrderOp.", "It is fundamental."],
}


def dynamo(tmp_path: Path, entries: list[dict], source: str = CALL) -> Path:
    (tmp_path / "graph_break_hints.py").write_text(
        'FUNDAMENTAL = ["It is fundamental."]\n'
    )
    (tmp_path / "side_effects.py").write_text(source)
    (tmp_path / "graph_break_registry.json").write_text(json.dumps({"GB1177": entries}))
    return tmp_path


def test_a_call_matching_its_newest_entry_is_in_sync(tmp_path):
    older = dict(ENTRY, Explanation="Inplace modifying is not allowed.")
    _, synced = registry(dynamo(tmp_path, [ENTRY, older]))
    assert synced == {"nn.Module mutation in HigherOrderOp": True}


def test_a_call_matching_only_an_older_entry_is_not(tmp_path):
    older = dict(ENTRY, Explanation="Inplace modifying is not allowed.")
    _, synced = registry(dynamo(tmp_path, [older, ENTRY]))
    assert synced == {"nn.Module mutation in HigherOrderOp": False}


def test_a_gb_type_raised_with_two_texts_is_not(tmp_path):
    twice = CALL + CALL.replace("def f(", "def g(").replace("Not allowed.", "No.")
    _, synced = registry(dynamo(tmp_path, [ENTRY], twice))
    assert synced == {"nn.Module mutation in HigherOrderOp": False}


def test_unimplemented_v2_calls_are_read(tmp_path):
    # 2.8 and 2.9 raise graph breaks through unimplemented_v2.
    v2 = CALL.replace("unimplemented(", "unimplemented_v2(")
    _, synced = registry(dynamo(tmp_path, [ENTRY], v2))
    assert synced == {"nn.Module mutation in HigherOrderOp": True}


def test_a_series_that_puts_a_gb_type_out_of_sync_fails(tmp_path, capsys):
    for state, source in ("pristine", CALL), ("patched", CALL.replace("Not", "Un")):
        (tmp_path / state / "torch" / "_dynamo").mkdir(parents=True)
        dynamo(tmp_path / state / "torch" / "_dynamo", [ENTRY], source)
    assert not registry_check(tmp_path, "2.15.0")
    assert (
        "'nn.Module mutation in HigherOrderOp': not in sync" in capsys.readouterr().err
    )
