"""Does the patch slow Dynamo's tracing? Instructions and Python calls, patched vs pristine.

    python -m tools.bench.instructions --torch V...   # `make bench`: results/bench/latest.json
    python -m tools.bench.instructions --smoke ...    # make test: smoke-<releases>.json
    python -m tools.bench.instructions --calls ...    # `make bench-calls`: calls.json
    python -m tools.bench.instructions --report       # docs/benchmark.md's tables (--check)

A series' two states run in its venv, switched with torchpatch (left patched).
Fails where a workload that refuses nothing calls the fix's helper or moves
the instruction ratio beyond its resolution (docs/benchmark.md).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import re
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.plumbing import RESULTS, ROOT, STATES, between_markers, run, torchpatch
from torchpatch.series import version_key

Row = dict[str, Any]  # a workload's record, in one series and mode
BENCH_RESULTS = RESULTS / "bench"
CALLS, LATEST = BENCH_RESULTS / "calls.json", BENCH_RESULTS / "latest.json"
DOC = ROOT / "docs" / "benchmark.md"
# (workload, its size N): in this order, the columns of the calls table
CASES: list[Any] = [("root_setattr", 25), ("root_setattr", 50), ("root_setattr", 100)]
CASES += [("root_state_setattr", 25), ("hop_body_wrap", 50), ("hop_body_map", 25)]
CASES += [("hop_body_module", 20), ("mlp", None), ("conv_net", None)]
CASES += [("error_path", None)]
SMOKE_CASES = [("root_setattr", 5), ("root_state_setattr", 5), ("hop_body_module", 5)]
# Workloads that refuse nothing and walk no set hashed by id() (not hop_body_map).
FREE_CASES = (
    "root_setattr",
    "root_state_setattr",
    "hop_body_wrap",
    "hop_body_module",
    "mlp",
    "conv_net",
)
LAYOUTS = (0, 500, 1000)  # objects allocated before the worker imports torch
CALL_LAYOUTS = LAYOUTS[:2]  # also the smoke run's: two, for an A/A spread
CTL_SOURCE = Path(__file__).with_name("callgrind_ctl.c")
HELPER = "side_effects.py:unsupported_module_mutation"
VALGRIND = "valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no"
# Shift the heap, then run the worker as its own __main__ (from ROOT).
_WITH_LAYOUT = (
    "import runpy, sys; ballast = [bytearray(48) for _ in range(int(sys.argv[1]))]; "
    "sys.argv = sys.argv[2:]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def worker(python: Path, cases: Any, inline: int, layout: int, count: bool) -> Any:
    """Per case, its instructions (callgrind) if count, else {function: calls}."""
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        ctl = [f"{tmp}/libcallgrind_ctl.so"] if count else []
        valgrind = [*VALGRIND.split(), f"--callgrind-out-file={tmp}/out"]
        if count:
            run(["cc", "-shared", "-fPIC", "-O2", "-o", *ctl, CTL_SOURCE])
        argv = [str(layout), "tools.bench.workloads", str(inline), json.dumps(cases)]
        out = run(
            [*(valgrind if count else []), python, "-c", _WITH_LAYOUT, *argv, *ctl],
            cwd=ROOT,
            env=dict(os.environ, PYTHONHASHSEED="0"),
        )
        if not count:
            return json.loads(out.strip().splitlines()[-1])
        dumps = [Path(f"{tmp}/out.{i}").read_text() for i in range(1, len(cases) + 1)]
        return [int(re.findall(r"^totals: (\d+)", dump, re.M)[0]) for dump in dumps]


def calls_added(pristine: list[Any], patched: list[Any]) -> dict[str, int]:
    """A case's {function: calls}, per state over the layouts: the calls the
    series adds, but for those of functions whose calls the layout moves."""
    names = set().union(*pristine, *patched)
    spread = {n: [p.get(n, 0) for p in pristine + patched] for n in names}
    moved = {
        n
        for n in names
        for state in (pristine, patched)
        if len({p.get(n, 0) for p in state}) > 1
    }
    added = sum(patched[0].get(n, 0) - pristine[0].get(n, 0) for n in names - moved)
    return {
        "calls_added": added,
        "moved_by_layout": sum(max(spread[n]) - min(spread[n]) for n in moved),
        "helper_calls": sum(c for n, c in patched[0].items() if n.endswith(HELPER)),
    }


def measure(version: str, cases: Any, modes: list[int], layouts: Any) -> list[Row]:
    """A series' rows: the calls it adds and, over layouts, the instructions;
    a state's workers run one per core."""
    python = ROOT / ".venvs" / f"torch-{version}" / "bin" / "python"
    has = run([python, "-m", "torchpatch.inline_mode", "--modes"]).split()
    modes = [m for m in modes if str(m) in has]
    jobs = [(i, k, True) for i in modes for k in layouts]
    jobs += [(i, k, False) for i in modes for k in CALL_LAYOUTS]
    runs: dict[tuple[Any, ...], list[Any]] = {}  # (state, inline, count): per layout
    for state, command in zip(STATES, ("revert", "apply")):
        torchpatch(command, python=python)
        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            results = pool.map(lambda job: worker(python, cases, *job), jobs)
            for (inline, _, count), result in zip(jobs, results):
                runs.setdefault((state, inline, count), []).append(result)
    rows = []
    for inline, (c, (case, n)) in ((i, c) for i in modes for c in enumerate(cases)):
        row: Row = dict(series=version, case=case, n=n, inlining=inline)
        if layouts:
            by = [[found[c] for found in runs[s, inline, True]] for s in STATES]
            medians = [statistics.median(counts) for counts in by]
            row |= {
                "layouts": list(layouts),
                "pristine_by_layout": by[0],
                "patched_by_layout": by[1],
                **dict(zip(STATES, medians)),
                "ratio": medians[1] / medians[0],
                "aa_spread": max(abs(count / by[0][0] - 1) for count in by[0]),
            }
        calls = [[found[c] for found in runs[s, inline, False]] for s in STATES]
        rows.append(row | calls_added(*calls))
    return rows


def per_store(rows: list[Row]) -> list[Row]:
    """Instructions the patch adds per root attribute store: the least-squares
    slope of (patched - pristine) over N, per series and mode."""
    slopes = []
    for series, inline in sorted({(r["series"], r["inlining"]) for r in rows}):
        points = [
            (r["n"], r["patched"] - r["pristine"])
            for r in rows
            if (r["series"], r["inlining"], r["case"])
            == (series, inline, "root_setattr")
        ]
        if len(points) > 1:
            slope = statistics.linear_regression(*zip(*points)).slope
            slopes.append({"series": series, "inlining": inline, "per_store": slope})
    return slopes


def margin(row: Row) -> float:
    """Twice the ratio's A/A spread, never under 0.2%: three layouts do not
    show all the layout noise; a smoke row's two may show none."""
    return max(2 * float(row["aa_spread"]), 0.002)


def gate(rows: list[Row]) -> list[str]:
    """The workloads that refuse nothing, yet call the fix's helper or move the
    instruction ratio (where counted) beyond its margin."""
    return [
        f"torch {r['series']} {r['case']} n={r['n']} inlining={r['inlining']}: "
        f"{r['helper_calls']} calls of the helper, {r['calls_added']:+d} calls in all"
        + (
            f"; ratio {r['ratio']:.5f}, margin 1 +- {margin(r):.5f}"
            if "ratio" in r
            else ""
        )
        for r in rows
        if r["case"] in FREE_CASES
        and (r["helper_calls"] or "ratio" in r and abs(r["ratio"] - 1) > margin(r))
    ]


def on(inlining: int) -> str:
    return "on" if inlining else "off"


def calls_table(rows: list[Row]) -> str:
    """A row per release and mode; a cell: calls added (helper calls) ~moved."""
    columns = [f"{case} {n}" if n else case for case, n in CASES]
    lines = [f"| torch | inlining | {' | '.join(columns)} | measured |"]
    lines.append("|---" * (len(columns) + 3) + "|")
    by_key: dict[tuple[str, int], dict[Any, dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: (version_key(r["series"]), r["inlining"])):
        by_key.setdefault((r["series"], r["inlining"]), {})[r["case"], r["n"]] = r
    for (release, inlining), mine in by_key.items():
        cells = [
            f"{r['calls_added']:+d}"
            + (f" ({r['helper_calls']} helper)" if r["helper_calls"] else "")
            + (f" ~{r['moved_by_layout']}" if r["moved_by_layout"] else "")
            if r
            else ""
            for r in (mine.get(case) for case in CASES)
        ]
        dates = {r.get("date", "not recorded") for r in mine.values()}
        cells.append(", ".join(sorted(dates)))
        lines.append(f"| {release} | {on(inlining)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def instructions_section(result: Row) -> str:
    rows = result["rows"]
    releases = " ".join(sorted({r["series"] for r in rows}, key=version_key))
    free = [r for r in rows if r["case"] in FREE_CASES]
    worst = max(free, key=lambda r: abs(r["ratio"] - 1) / margin(r))
    lines = [
        f'`make bench TORCH="{releases}"` of {result.get("date", "a date not recorded")}: '
        f"{result['machine']}; {result['method']}; {result['seconds']} s.",
        "",
        "| series | case | n | inlining | pristine | patched | ratio | A/A spread | calls added |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['series']} | {r['case']} | {r['n'] or ''} | {on(r['inlining'])} "
            f"| {r['pristine']:,.0f} | {r['patched']:,.0f} | {r['ratio']:.5f} "
            f"| {r['aa_spread']:.5f} | {r['calls_added']:+d} |"
            for r in rows
        ),
        "",
        f"Of the workloads that refuse nothing, the one nearest its margin is "
        f"torch {worst['series']} {worst['case']} {worst['n'] or ''} (inlining "
        f"{on(worst['inlining'])}): ratio {worst['ratio']:.5f}, A/A spread "
        f"{worst['aa_spread']:.5f}, margin {margin(worst):.5f}, "
        f"{worst['calls_added']:+d} calls.",
        *(
            f"Instructions per root attribute store, torch {s['series']} inlining "
            f"{on(s['inlining'])}: {s['per_store']:+,.0f}."
            for s in result.get("per_store", [])
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", nargs="+", default=[], metavar="VERSION")
    parser.add_argument("--smoke", action="store_true", help="tiny and fast")
    parser.add_argument("--calls", action="store_true", help="Python calls only")
    parser.add_argument("--report", action="store_true", help="docs/benchmark.md")
    parser.add_argument("--check", action="store_true", help="with --report")
    args = parser.parse_args()
    today = time.strftime("%Y-%m-%d")
    if args.report:
        calls = calls_table(json.loads(CALLS.read_text())["rows"])
        latest = instructions_section(json.loads(LATEST.read_text()))
        text = new = DOC.read_text()
        for name, table in ("calls", calls), ("instructions", latest):
            begin = f"<!-- {name} table: generated by tools/bench/instructions.py -->"
            new = between_markers(new, begin, f"<!-- end of {name} table -->", table)
        if args.check and new != text:
            raise SystemExit(f"bench report: {DOC} differs from {BENCH_RESULTS}")
        if not args.check:
            DOC.write_text(new)
        return
    started = time.monotonic()
    cases: list[Any] = SMOKE_CASES if args.smoke else CASES
    modes = [1] if args.smoke else [0, 1]
    layouts = () if args.calls else CALL_LAYOUTS if args.smoke else LAYOUTS
    rows = [r for v in args.torch for r in measure(v, cases, modes, layouts)]
    if args.calls:
        rows = [r | {"date": today} for r in rows]
        # The measured releases' rows replace theirs, under a lock: `make
        # bench-calls TORCH=all` runs JOBS releases at once.
        with open(CALLS.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            kept = json.loads(CALLS.read_text())["rows"] if CALLS.exists() else []
            measured = {r["series"] for r in rows}
            kept = [r for r in kept if r["series"] not in measured] + rows
            kept.sort(key=lambda r: version_key(r["series"]))
            CALLS.write_text(json.dumps({"rows": kept}, indent=2) + "\n")
        print(calls_table(rows))
    else:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        cpu = re.findall(r"^model name\s*:\s*(.*?)\s*$", cpuinfo, re.M)
        result = {
            "date": today,
            "machine": f"{(cpu or [platform.machine()])[0]}, {platform.system()} "
            f"{platform.release()}, {run(['valgrind', '--version']).strip()}",
            "method": "callgrind instruction counts of one fresh trace per workload, "
            "median over heap layouts",
            "rows": rows,
            "per_store": per_store(rows),
            "seconds": round(time.monotonic() - started),
        }
        name = f"smoke-{'-'.join(args.torch)}" if args.smoke else "latest"
        (BENCH_RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(instructions_section(result))
    if problems := gate(rows):
        raise SystemExit("bench: refusing nothing, yet paying:\n" + "\n".join(problems))


if __name__ == "__main__":
    main()
