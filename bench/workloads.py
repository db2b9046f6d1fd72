"""What bench/trace_overhead.py times, and the worker process that times it.

Each workload is a module and an input; a measurement is one fresh Dynamo
trace of it: torch._dynamo.reset(), then the first call of
torch.compile(module, backend="eager"). The worker runs in a process of its
own so that TORCHDYNAMO_INLINE_INBUILT_NN_MODULES, read at import, sets the
mode, and prints the median CPU seconds of each workload as JSON.

    python bench/workloads.py '[["root_setattr", 100], ["mlp", null]]' REPS
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch._dynamo
from functorch.experimental.control_flow import map as control_flow_map
from torch._higher_order_ops.wrap import wrap

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from issue_126355 import Module as Seed  # noqa: E402


def _function(name: str, args: str, lines: list[str], returns: str):
    """Compile a straight-line function: no loop for Dynamo to unroll."""
    body = "".join(f"    {line}\n" for line in lines)
    namespace: dict = {}
    exec(f"def {name}({args}):\n{body}    return {returns}\n", namespace)
    return namespace[name]


class RootSetattr(torch.nn.Module):
    """forward does n attribute stores on self at the root tracer."""

    def __init__(self, n: int):
        super().__init__()
        lines = [f"self.v{i % 16} = {i}" for i in range(n)]
        self.stores = _function("stores", "self, x", lines, "x + 1")
        for i in range(16):
            setattr(self, f"v{i}", 0)

    def forward(self, x):
        return self.stores(self, x)


class HopBody(torch.nn.Module):
    """A wrap or map body of n pure tensor ops, no mutation."""

    def __init__(self, hop: str, n: int):
        super().__init__()
        self.body = _function("body", "t", ["t = t * 1.0001 + 0.5"] * n, "t")
        self.hop = wrap if hop == "wrap" else control_flow_map

    def forward(self, x):
        return self.hop(self.body, x)


def conv_net() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 10),
    )


def mlp(layers: int = 8) -> torch.nn.Module:
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks)


def workload(case: str, n: int | None):
    """(module, input) for a case."""
    if case == "root_setattr":
        return RootSetattr(n), torch.randn(4)
    if case in ("hop_body_wrap", "hop_body_map"):
        return HopBody(case.removeprefix("hop_body_"), n), torch.randn(3, 4)
    if case == "mlp":
        return mlp(), torch.randn(8, 64)
    if case == "conv_net":
        return conv_net().eval(), torch.randn(2, 3, 16, 16)
    if case == "error_path":
        return Seed(), torch.randn(3, 2)
    raise ValueError(f"unknown case {case!r}")


def trace_seconds(case: str, n: int | None) -> float:
    module, x = workload(case, n)
    torch._dynamo.reset()
    compiled = torch.compile(module, backend="eager", fullgraph=(case == "error_path"))
    # CPU time of this process with the collector paused: collection pauses
    # and the other core's load depend on the machine, not on the patch.
    gc.collect()
    gc.disable()
    start = time.process_time()
    try:
        compiled(x)
    except torch._dynamo.exc.Unsupported:
        if case != "error_path":
            raise
    finally:
        elapsed = time.process_time() - start
        gc.enable()
    return elapsed


def main(cases: list, reps: int) -> dict:
    torch.set_num_threads(1)
    trace_seconds("mlp", None)  # warm up imports and caches outside the timings
    timings = {}
    for case, n in cases:
        samples = [trace_seconds(case, n) for _ in range(reps)]
        timings[f"{case}:{n}"] = statistics.median(samples)
    return timings


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]), int(sys.argv[2]))))
