"""Does the patch slow Dynamo's tracing? Instructions, patched vs pristine.

Like PyTorch's compile-time benchmarks (benchmarks/dynamo/pr_time_benchmarks)
this counts instructions, not seconds: callgrind runs one worker process
(tools/bench/workloads.py) per (torch series, torch state, inlining mode, heap
layout), which traces every workload once unmeasured and once measured.

Counts are exactly repeatable, but not independent of where objects land:
Dynamo keeps VariableTrackers and guards in dicts and sets hashed by id(),
so any change to the code that is imported (such as a patch) moves the heap
and changes probe sequences and iteration orders, by a few hundredths of a
percent even where not one changed line runs. So each state runs under
LAYOUTS, small allocations made before torch is imported, and a row gives
the median count over them. The A/A column is the layout-only spread of
the pristine state (largest |pristine at layout k / at layout 0 - 1|): what
the measurement resolves. The calls column is sharper: how many more Python
function calls the patched trace makes (cProfile, no valgrind, the same
PYTHONHASHSEED), which layout moves only where Dynamo walks a set hashed by
id(). Both states run from the same
path, the series' own virtualenv, switched with torchpatch: Dynamo's trace
rules iterate sets of torch's install paths, so a copy of the venv elsewhere
would trace differently. Workers for the modes and layouts of a state run
one per core. Leaves the series applied.

    python -m tools.bench.instructions                  # `make bench`: every series
    python -m tools.bench.instructions --torch 2.6.0    # one series
    python -m tools.bench.instructions --smoke          # seconds of tracing, for make test
    python -m tools.bench.instructions --calls          # `make bench-calls`: calls only

Writes results/bench/latest.json (smoke: smoke-<releases>.json, so that
`make test TORCH=all JOBS=2` runs two at once; --calls: calls.json).
Fails where a workload that refuses nothing (FREE_CASES) calls the fix's
helper, or moves the instruction ratio beyond what the heap layout alone
moves it (its A/A spread, see `beyond_resolution`); the Python calls it
adds are reported, not gated: Dynamo's own idiom (`is_root_tracer()`)
costs one. The smoke run in `make test` keeps that so on every series.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.plumbing import BUILD, RESULTS, ROOT, STATES, torchpatch
from torchpatch.series import supported_versions, version_key

BENCH_RESULTS = RESULTS / "bench"

# torch 2.6.0 spends about 30 million instructions on one root attribute
# store of these modules, so the sizes are kept small.
ROOT_SETATTR_N = (25, 50, 100)
CASES = [
    *(("root_setattr", n) for n in ROOT_SETATTR_N),
    ("root_state_setattr", 25),
    ("hop_body_wrap", 50),
    ("hop_body_map", 25),
    ("hop_body_module", 20),
    ("mlp", None),
    ("conv_net", None),
    ("error_path", None),
]
SMOKE_CASES = [("root_setattr", 5), ("root_state_setattr", 5), ("hop_body_module", 5)]
# Workloads that refuse nothing and walk no set hashed by id(): the series
# must add no Python call to their traces (hop_body_map's count moves with
# the heap layout, see docs/benchmark.md).
FREE_CASES = ("root_setattr", "root_state_setattr", "hop_body_wrap", "hop_body_module",
              "mlp", "conv_net")  # fmt: skip
LAYOUTS = (0, 500, 1000)  # objects allocated before the worker imports torch
SMOKE_LAYOUTS = LAYOUTS[:2]  # two, so that a smoke run has an A/A spread
# The instruction ratio of a workload that refuses nothing must stay within
# NOISE_FACTOR times its row's A/A spread, and is never held to less than
# NOISE_FLOOR: three layouts do not show the whole layout noise (2.13.0's
# root_setattr measured 1.00109 against a spread of 0.00066 with no call
# added), and a smoke row's two layouts may show none.
NOISE_FACTOR = 2
NOISE_FLOOR = 0.002
CALL_LAYOUTS = LAYOUTS[:2]  # the call profiles' layouts
HELPER = "side_effects.py:unsupported_module_mutation"
# Shift the heap, then run the worker as its own __main__ (from ROOT).
_WITH_LAYOUT = (
    "import runpy, sys; ballast = [bytearray(48) for _ in range(int(sys.argv[1]))]; "
    "sys.argv = sys.argv[2:]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)
WORKER = "tools.bench.workloads"
CALLGRIND_CTL = Path(__file__).resolve().parent / "callgrind_ctl.c"


def build_library(out: Path) -> Path:
    library = out / "libcallgrind_ctl.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", "-o", library, CALLGRIND_CTL],
        check=True,
    )
    return library


def count(
    python: Path, library: Path, inline: int, layout: int, cases: list[Any]
) -> dict[str, int]:
    """Instructions of each case's measured trace, in one callgrind worker."""
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             "--collect-atstart=no", f"--callgrind-out-file={out}",
             python, "-c", _WITH_LAYOUT, str(layout), WORKER,
             library, str(inline), json.dumps(cases)],
            env=dict(os.environ, PYTHONHASHSEED="0"), cwd=ROOT,
            capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"bench: worker failed:\n{proc.stderr[-3000:]}")
        keys = json.loads(proc.stdout.strip().splitlines()[-1])
        return {key: _totals(Path(f"{out}.{i}")) for i, key in enumerate(keys, 1)}


def calls(
    python: Path, inline: int, layout: int, cases: list[Any]
) -> dict[str, dict[str, Any]]:
    """{case: {function: calls}} of each case's trace, in one cProfile worker."""
    proc = subprocess.run(
        [python, "-c", _WITH_LAYOUT, str(layout), WORKER, "--calls",
         str(inline), json.dumps(cases)],
        env=dict(os.environ, PYTHONHASHSEED="0"), cwd=ROOT,
        capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"bench: worker failed:\n{proc.stderr[-3000:]}")
    profiles: dict[str, dict[str, Any]] = json.loads(
        proc.stdout.strip().splitlines()[-1]
    )
    return profiles


def calls_added(
    pristine: list[dict[str, Any]], patched: list[dict[str, Any]]
) -> dict[str, int]:
    """What the series adds to one case's trace, from its per-function calls
    under each heap layout (a list of {function: calls} per state).

    Dynamo walks some containers hashed by id(), so a few functions are
    called more or less often when only the heap layout moves: those whose
    counts differ between two layouts of one state are left out of
    `calls_added` and summed up in `moved_by_layout`. `helper_calls` counts
    the calls of the fix's own helper."""
    names = set().union(*pristine, *patched)

    def stable(runs: list[dict[str, Any]], name: str) -> bool:
        return len({run.get(name, 0) for run in runs}) == 1

    steady = {n for n in names if stable(pristine, n) and stable(patched, n)}
    return {
        "calls_added": sum(
            patched[0].get(n, 0) - pristine[0].get(n, 0) for n in steady
        ),
        "moved_by_layout": sum(
            max(run.get(n, 0) for run in pristine + patched)
            - min(run.get(n, 0) for run in pristine + patched)
            for n in names - steady
        ),
        "helper_calls": sum(
            count for n, count in patched[0].items() if n.endswith(HELPER)
        ),
    }


def call_profiles(
    python: Path, modes: list[int], cases: list[Any], pool: ThreadPoolExecutor
) -> dict[tuple[int, int], Any]:
    """{(inline, layout): {case: {function: calls}}} for this venv's state."""
    jobs = [(inline, layout) for inline in modes for layout in CALL_LAYOUTS]
    found = pool.map(lambda job: calls(python, job[0], job[1], cases), jobs)
    return dict(zip(jobs, found))


# {(state, inline, layout): what a worker measured, per case}
ByJob = dict[tuple[str, int, int], Any]


def compare_calls(profiled: ByJob, inline: int, key: str) -> dict[str, int]:
    return calls_added(
        [profiled[("pristine", inline, k)][key] for k in CALL_LAYOUTS],
        [profiled[("patched", inline, k)][key] for k in CALL_LAYOUTS],
    )


def _totals(part: Path) -> int:
    for line in part.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"bench: no totals in {part}")


def series_modes(python: Path, wanted: Sequence[int]) -> list[int]:
    """The wanted inlining modes that this venv's torch has."""
    proc = subprocess.run(
        [python, "-m", "torchpatch.inline_mode", "--modes"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [m for m in wanted if str(m) in proc.stdout.split()]


def switched(python: Path) -> Iterator[str]:
    """Each state in turn, the series' venv switched to it in place (a copy
    elsewhere would trace differently, see above); left patched."""
    for state, command in zip(STATES, ("revert", "apply")):
        torchpatch(command, python=python)
        yield state


def measure_series(
    version: str,
    cases: list[Any],
    layouts: Sequence[int],
    wanted: Sequence[int],
    library: Path,
) -> list[dict[str, Any]]:
    python = ROOT / ".venvs" / f"torch-{version}" / "bin" / "python"
    modes = series_modes(python, wanted)
    counts: ByJob = {}
    profiled: ByJob = {}
    for state in switched(python):
        jobs = [(state, inline, k) for inline in modes for k in layouts]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            found = pool.map(
                lambda job: count(python, library, job[1], job[2], cases), jobs
            )
            counts.update(zip(jobs, found))
            for (inline, k), c in call_profiles(python, modes, cases, pool).items():
                profiled[(state, inline, k)] = c
    rows = []
    for inline in modes:
        for case, n in cases:
            key = f"{case}:{n}"
            by_layout = {
                s: [counts[(s, inline, k)][key] for k in layouts] for s in STATES
            }
            pristine = statistics.median(by_layout["pristine"])
            patched = statistics.median(by_layout["patched"])
            first = by_layout["pristine"][0]
            rows.append(
                {
                    "series": version,
                    "case": case,
                    "n": n,
                    "inlining": inline,
                    "layouts": list(layouts),
                    "pristine_by_layout": by_layout["pristine"],
                    "patched_by_layout": by_layout["patched"],
                    "pristine": pristine,
                    "patched": patched,
                    "ratio": patched / pristine,
                    "aa_spread": max(abs(c / first - 1) for c in by_layout["pristine"]),
                    **compare_calls(profiled, inline, key),
                }
            )
    return rows


def per_store(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Instructions the patch adds per root attribute store: the least-squares
    slope of (patched - pristine) over N, per series and mode."""
    slopes = []
    for key in sorted({(r["series"], r["inlining"]) for r in rows}):
        points = [
            (r["n"], r["patched"] - r["pristine"])
            for r in rows
            if (r["series"], r["inlining"]) == key and r["case"] == "root_setattr"
        ]
        if len(points) < 2:
            continue
        mean_n = sum(n for n, _ in points) / len(points)
        mean_d = sum(d for _, d in points) / len(points)
        slope = sum((n - mean_n) * (d - mean_d) for n, d in points) / sum(
            (n - mean_n) ** 2 for n, _ in points
        )
        slopes.append({"series": key[0], "inlining": key[1], "per_store": slope})
    return slopes


def table(rows: list[dict[str, Any]]) -> str:
    header = ("| series | case | n | inlining | pristine | patched | ratio "
              "| A/A spread | calls added |\n|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    lines = [header]
    for r in rows:
        lines.append(
            f"| {r['series']} | {r['case']} | {r['n'] or ''} "
            f"| {'on' if r['inlining'] else 'off'} | {r['pristine']:,.0f} "
            f"| {r['patched']:,.0f} | {r['ratio']:.5f} | {r['aa_spread']:.5f} "
            f"| {r['calls_added']:+d} |"
        )
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    valgrind = subprocess.run(
        ["valgrind", "--version"], capture_output=True, text=True
    ).stdout.strip()
    return f"{cpu}, {platform.system()} {platform.release()}, {valgrind}"


def count_calls(
    version: str, cases: list[Any], wanted: Sequence[int]
) -> list[dict[str, Any]]:
    """What the series adds to each case's Python calls (cProfile only)."""
    python = ROOT / ".venvs" / f"torch-{version}" / "bin" / "python"
    modes = series_modes(python, wanted)
    profiled: ByJob = {}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for state in switched(python):
            for (inline, k), c in call_profiles(python, modes, cases, pool).items():
                profiled[(state, inline, k)] = c
    return [
        {
            "series": version,
            "case": case,
            "n": n,
            "inlining": inline,
            **compare_calls(profiled, inline, f"{case}:{n}"),
        }
        for inline in modes
        for case, n in cases
    ]


def _where(r: dict[str, Any]) -> str:
    return f"torch {r['series']} {r['case']} n={r['n']} inlining={r['inlining']}"


def helper_called(rows: list[dict[str, Any]]) -> list[str]:
    """The rows that refuse nothing, yet call the fix's helper."""
    return [
        f"{_where(r)}: {r['helper_calls']} calls of the helper "
        f"({r['calls_added']:+d} calls in all)"
        for r in rows
        if r["case"] in FREE_CASES and r["helper_calls"]
    ]


def margin(row: dict[str, Any]) -> float:
    return max(NOISE_FACTOR * float(row["aa_spread"]), NOISE_FLOOR)


def beyond_resolution(rows: list[dict[str, Any]]) -> list[str]:
    """The rows that refuse nothing, yet move the instruction ratio by more
    than the heap layout alone does."""
    return [
        f"{_where(r)}: ratio {r['ratio']:.5f}, beyond 1 +- {margin(r):.5f} "
        f"(A/A spread {r['aa_spread']:.5f}; {r['calls_added']:+d} calls)"
        for r in rows
        if r["case"] in FREE_CASES and abs(r["ratio"] - 1) > margin(r)
    ]


def record_calls(out: Path, rows: list[dict[str, Any]]) -> None:
    """Replaces the rows of the measured releases in out, keeping the rest:
    `make bench-calls TORCH=all` measures one release (one venv) at a time,
    JOBS at once."""
    measured = {r["series"] for r in rows}
    with open(out.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kept = json.loads(out.read_text())["rows"] if out.exists() else []
        merged = [r for r in kept if r["series"] not in measured] + rows
        merged.sort(key=lambda r: version_key(r["series"]))
        out.write_text(json.dumps({"rows": merged}, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--torch",
        nargs="+",
        default=supported_versions(ROOT / "patches"),
        metavar="VERSION",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny and fast")
    parser.add_argument(
        "--calls", action="store_true", help="Python calls added only, no callgrind"
    )
    args = parser.parse_args()
    if args.calls:
        rows = []
        for version in args.torch:
            rows += count_calls(version, CASES, (0, 1))
        today = time.strftime("%Y-%m-%d")
        record_calls(BENCH_RESULTS / "calls.json", [dict(r, date=today) for r in rows])
        for r in rows:
            print(f"{r['series']:<7} {r['case']:<19} {r['n'] or '':>4} "
                  f"inlining={r['inlining']} {r['calls_added']:+d} "
                  f"(helper {r['helper_calls']}, "
                  f"moved by layout {r['moved_by_layout']})")  # fmt: skip
        paying = helper_called(rows)
        if paying:
            raise SystemExit("bench: the helper runs where nothing is refused:\n"
                             + "\n".join(paying))  # fmt: skip
        return 0
    work = BUILD / "bench"
    cases: list[Any]
    layouts: Sequence[int]
    modes: Sequence[int]
    if args.smoke:
        cases, layouts, modes = SMOKE_CASES, SMOKE_LAYOUTS, (1,)
        name = f"smoke-{'-'.join(args.torch)}"
        out = BENCH_RESULTS / f"{name}.json"
        work = work / name
    else:
        cases, layouts, modes = CASES, LAYOUTS, (0, 1)
        out = BENCH_RESULTS / "latest.json"
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    library = build_library(work)
    rows = []
    for version in args.torch:
        rows += measure_series(version, cases, layouts, modes, library)
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "method": "callgrind instruction counts of one fresh trace per workload, "
        "median over heap layouts",
        "rows": rows,
        "per_store": per_store(rows),
        "seconds": round(time.monotonic() - started),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(rows))
    for s in result["per_store"]:
        print(f"torch {s['series']}, inlining {'on' if s['inlining'] else 'off'}: "
              f"{s['per_store']:+.1f} instructions per root attribute store")  # fmt: skip
    worst = max(r["ratio"] for r in rows)
    spread = max(r["aa_spread"] for r in rows)
    print(f"worst ratio {worst:.5f}, largest A/A spread {spread:.5f}; "
          f"wrote {out} in {result['seconds']} s")  # fmt: skip
    if any(r["pristine"] <= 0 or r["patched"] <= 0 for r in rows):
        raise SystemExit("bench: a workload counted no instructions")
    paying = helper_called(rows) + beyond_resolution(rows)
    if paying:
        raise SystemExit("bench: a workload that refuses nothing pays:\n"
                         + "\n".join(paying))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
