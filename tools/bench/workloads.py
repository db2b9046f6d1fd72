"""What tools/bench/instructions.py measures, and the worker process that runs it.

A measurement is one fresh Dynamo trace of a workload: torch._dynamo.reset(),
then the first call of torch.compile(module, backend="eager"). The worker
runs under `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`
and, for each workload, first traces it once unmeasured (imports, lazily
built tables and other first-call caches), then traces it again with
instrumentation and collection switched on around the call alone
(tools/bench/callgrind_ctl.c), which dumps one callgrind profile part per
workload, in order. The garbage collector is paused around the measured
call; the parent fixes PYTHONHASHSEED and the heap layout.

    python -m tools.bench.workloads LIBCALLGRIND_CTL INLINE CASES_JSON
    python -m tools.bench.workloads --calls INLINE CASES_JSON

INLINE is 0 or 1 (config.inline_inbuilt_nn_modules; 1 from 2.12 on, where
modules are always inlined); CASES_JSON a list of
[case, n] pairs. It prints the list of case keys it measured, in order; with
--calls (no valgrind) it profiles the same trace with cProfile instead and
prints {case key: {function: calls}} (tools/bench/instructions.py compares them).
"""

from __future__ import annotations

import cProfile
import ctypes
import gc
import json
import pstats
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
from functorch.experimental.control_flow import map as control_flow_map
from torch._higher_order_ops.wrap import wrap

from fix_tests._hop_mutation_test_utils import Issue126355
from torchpatch.inline_mode import set_mode


def _function(name: str, args: str, lines: list[str], returns: str) -> Any:
    """Compile a straight-line function: no loop for Dynamo to unroll."""
    body = "".join(f"    {line}\n" for line in lines)
    namespace: dict[str, Any] = {}
    exec(f"def {name}({args}):\n{body}    return {returns}\n", namespace)
    return namespace[name]


class RootSetattr(torch.nn.Module):
    """forward does n attribute stores on self at the root tracer."""

    def __init__(self, n: int) -> None:
        super().__init__()
        lines = [f"self.v{i % 16} = {i}" for i in range(n)]
        self.stores = _function("stores", "self, x", lines, "x + 1")
        for i in range(16):
            setattr(self, f"v{i}", 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stores(self, x)


class RootStateSetattr(torch.nn.Module):
    """forward does n stores to registered buffers at the root tracer: the
    stores the fix also checks outside SideEffects.store_attr."""

    def __init__(self, n: int) -> None:
        super().__init__()
        lines = [f"self.b{i % 4} = x + {i}" for i in range(n)]
        self.stores = _function("stores", "self, x", lines, "x + self.b0")
        for i in range(4):
            self.register_buffer(f"b{i}", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stores(self, x)


class HopBody(torch.nn.Module):
    """A wrap or map body of n pure tensor ops, no mutation."""

    def __init__(self, hop: str, n: int) -> None:
        super().__init__()
        self.body = _function("body", "t", ["t = t * 1.0001 + 0.5"] * n, "t")
        self.hop = wrap if hop == "wrap" else control_flow_map

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hop(self.body, x)


class Scratch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for i in range(16):
            setattr(self, f"v{i}", 0)


class HopBodyModule(torch.nn.Module):
    """A wrap body that creates a module and makes n attribute stores on it:
    every store asks the fix whether the module may be mutated there."""

    def __init__(self, n: int) -> None:
        super().__init__()
        lines = ["m = Scratch()"] + [f"m.v{i % 16} = {i}" for i in range(n)]
        self.body = _function("body", "t", lines, "t + m.v0")
        self.body.__globals__["Scratch"] = Scratch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return wrap(self.body, x)


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


def workload(case: str, n: int | None) -> tuple[torch.nn.Module, torch.Tensor]:
    """(module, input) for a case; n sizes all but the last four."""
    size = n or 0
    if case == "root_setattr":
        return RootSetattr(size), torch.randn(4)
    if case == "root_state_setattr":
        return RootStateSetattr(size), torch.randn(4)
    if case in ("hop_body_wrap", "hop_body_map"):
        return HopBody(case.removeprefix("hop_body_"), size), torch.randn(3, 4)
    if case == "hop_body_module":
        return HopBodyModule(size), torch.randn(3, 4)
    if case == "mlp":
        return mlp(), torch.randn(8, 64)
    if case == "conv_net":
        return conv_net().eval(), torch.randn(2, 3, 16, 16)
    if case == "error_path":
        return Issue126355(), torch.randn(3, 2)
    raise ValueError(f"unknown case {case!r}")


def trace(
    case: str,
    n: int | None,
    measure: tuple[Callable[[], None], Callable[[], None]] | None = None,
) -> None:
    """One fresh trace; measure = (begin, end) switches counting around it."""
    module, x = workload(case, n)
    torch._dynamo.reset()
    compiled = torch.compile(module, backend="eager", fullgraph=(case == "error_path"))
    gc.collect()
    gc.disable()
    if measure:
        measure[0]()
    try:
        compiled(x)
    except (
        torch._dynamo.exc.Unsupported,
        torch._dynamo.exc.UncapturedHigherOrderOpError,
    ):
        if case != "error_path":
            raise
    finally:
        if measure:
            measure[1]()
        gc.enable()


def function_calls(stats: pstats.Stats) -> dict[str, int]:
    """Calls per function, keyed by file and name: not by line, which a patch
    moves, nor by a builtin's address, which the heap layout moves."""
    calls: dict[str, int] = {}
    for (path, _, name), (_, total, *_) in stats.stats.items():  # type: ignore[attr-defined]
        key = f"{path.rpartition('site-packages/')[2]}:{name.split(' at 0x')[0]}"
        calls[key] = calls.get(key, 0) + total
    return calls


def main(
    library: str, inline: bool, cases: list[Any]
) -> list[str] | dict[str, dict[str, Any]]:
    torch.set_num_threads(1)
    set_mode(inline)
    if library == "--calls":
        calls = {}
        for case, n in cases:
            trace(case, n)
            profile = cProfile.Profile()
            trace(case, n, (profile.enable, profile.disable))
            calls[f"{case}:{n}"] = function_calls(pstats.Stats(profile))
        return calls
    ctl = ctypes.CDLL(library)
    measured = []
    for case, n in cases:
        trace(case, n)
        trace(case, n, (ctl.measure_begin, ctl.measure_end))
        measured.append(f"{case}:{n}")
    return measured


if __name__ == "__main__":
    library, inline, cases = sys.argv[1:]
    print(json.dumps(main(library, inline == "1", json.loads(cases))))
