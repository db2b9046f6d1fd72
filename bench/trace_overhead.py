"""Does the patch slow Dynamo's tracing? Patched vs pristine, in one run.

Each round measures, for each inlining mode, both torch states back to
back, switching with `torchpatch revert` and `torchpatch apply` (in ABBA
order, so slow drift of the machine cancels), each in a fresh worker
process (bench/workloads.py) that takes the median CPU time of a few fresh
traces per workload. A round's ratio is patched / pristine for each
workload and mode; a row reports the median, min and max ratio over the
rounds and the median seconds of each state. Rows whose workload never
reaches the patched code (mlp, conv_net, the HOP bodies) show the noise
of the measurement itself.

    python bench/trace_overhead.py            # the full run, for `make bench`
    python bench/trace_overhead.py --smoke    # seconds: keeps it working

Leaves the series applied.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
CASES = [
    ("root_setattr", 100),
    ("root_setattr", 1000),
    ("root_setattr", 3000),
    ("hop_body_wrap", 100),
    ("hop_body_wrap", 300),
    ("hop_body_map", 100),
    ("hop_body_map", 200),
    ("mlp", None),
    ("conv_net", None),
    ("error_path", None),
]
SMOKE_CASES = [(case, 10 if n else None) for case, n in dict(CASES).items()]
STATES = {"pristine": "revert", "patched": "apply"}


def torchpatch(command: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "torchpatch", command],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def measure(cases: list, reps: int, inline: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["TORCHDYNAMO_INLINE_INBUILT_NN_MODULES"] = str(inline)
    proc = subprocess.run(
        [sys.executable, str(BENCH / "workloads.py"), json.dumps(cases), str(reps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(cases: list, rounds: int, reps: int) -> list[dict]:
    # seconds[(state, inline)][workload] -> one median per round
    seconds: dict = {}
    try:
        for round_ in range(rounds):
            for inline in (0, 1):
                # ABBA: each pair is measured back to back, in both orders.
                order = list(STATES)
                if (round_ + inline) % 2:
                    order.reverse()
                for state in order:
                    torchpatch(STATES[state])
                    for key, value in measure(cases, reps, inline).items():
                        seconds.setdefault((state, inline), {}).setdefault(
                            key, []
                        ).append(value)
            print(f"round {round_ + 1}/{rounds} done", file=sys.stderr)
    finally:
        torchpatch("apply")
    rows = []
    for case, n in cases:
        key = f"{case}:{n}"
        for inline in (0, 1):
            pristine = seconds[("pristine", inline)][key]
            patched = seconds[("patched", inline)][key]
            ratios = [b / a for a, b in zip(pristine, patched)]
            rows.append(
                {
                    "case": case,
                    "n": n,
                    "inline": inline,
                    "ratio_median": statistics.median(ratios),
                    "ratio_min": min(ratios),
                    "ratio_max": max(ratios),
                    "pristine_s": statistics.median(pristine),
                    "patched_s": statistics.median(patched),
                }
            )
    return rows


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def table(rows: list[dict]) -> str:
    lines = [
        "case           n     inline  ratio median  [min, max]       pristine s  patched s"
    ]
    for r in rows:
        n = "" if r["n"] is None else str(r["n"])
        lines.append(
            f"{r['case']:<14} {n:<5} {r['inline']:<7} {r['ratio_median']:<13.3f} "
            f"[{r['ratio_min']:.3f}, {r['ratio_max']:.3f}]   "
            f"{r['pristine_s']:<11.4f} {r['patched_s']:.4f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny and fast")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.smoke:
        cases, rounds, reps = SMOKE_CASES, 1, 1
        out = args.out or BENCH / "results" / "smoke.json"
    else:
        cases, rounds, reps = CASES, args.rounds, args.reps
        out = args.out or BENCH / "results" / "latest.json"
    from importlib.metadata import version

    rows = run(cases, rounds, reps)
    result = {"torch": version("torch"), "machine": machine(), "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"torch {result['torch']} on {result['machine']}")
    print(f"{rounds} rounds x {reps} traces; ratio = patched / pristine")
    print(table(rows))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
