"""bench/instructions.py's gate: what a workload that refuses nothing may cost."""

from __future__ import annotations

from tools.bench.instructions import gate


def row(case="root_setattr", ratio=1.0, aa_spread=0.0, calls_added=0, helper=0):
    return {"series": "2.15.0", "case": case, "n": 5, "inlining": 1,
            "ratio": ratio, "aa_spread": aa_spread, "calls_added": calls_added,
            "helper_calls": helper}  # fmt: skip


def test_calls_the_idiom_costs_do_not_fail_the_gate():
    assert gate([row(calls_added=5, ratio=1.0004, aa_spread=0.0003)]) == []


def test_a_ratio_beyond_twice_the_spread_fails():
    (problem,) = gate([row(ratio=1.009, aa_spread=0.004)])
    assert "ratio 1.00900, margin 1 +- 0.00800" in problem
    assert gate([row(ratio=0.991, aa_spread=0.004)])


def test_a_row_with_no_spread_is_held_to_the_floor():
    assert gate([row(ratio=1.0019)]) == []
    assert gate([row(ratio=1.0021)])


def test_the_helper_may_not_run_where_nothing_is_refused():
    (problem,) = gate([row(helper=1, calls_added=7)])
    assert "1 calls of the helper, +7 calls in all" in problem
    calls_only = {
        k: v for k, v in row(helper=1).items() if k not in ("ratio", "aa_spread")
    }
    assert gate([calls_only])  # a --calls row has no ratio


def test_workloads_that_refuse_are_not_gated():
    assert gate([row(case="error_path", ratio=1.05, helper=1, calls_added=110)]) == []
