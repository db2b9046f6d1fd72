"""The benchmark's workloads, and its worker (run by tools/bench/instructions.py):

python -m tools.bench.workloads INLINE CASES_JSON [LIBCALLGRIND_CTL]
"""

from __future__ import annotations

import cProfile
import ctypes
import gc
import json
import sys
from typing import Any

import torch
import torch._dynamo
from functorch.experimental.control_flow import map as control_flow_map
from torch import nn
from torch._higher_order_ops.wrap import wrap

from fix_tests._hop_mutation_test_utils import Issue126355
from torchpatch.inline_mode import set_mode


class Scratch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for i in range(16):
            setattr(self, f"v{i}", 0)


class Root(Scratch):
    """forward runs lines, straight (no loop for Dynamo to unroll), on self at
    the root tracer: self has attributes v0 to v15, and buffers b0, b1..."""

    args = "self, x"

    def __init__(
        self, lines: list[str], returns: str, hop: Any = None, buffers: int = 0
    ) -> None:
        super().__init__()
        code = "".join(f"    {line}\n" for line in lines)
        namespace: dict[str, Any] = {"Scratch": Scratch}
        exec(f"def body({self.args}):\n{code}    return {returns}\n", namespace)
        self.body, self.hop = namespace["body"], hop
        for i in range(buffers):
            self.register_buffer(f"b{i}", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self, x)


class Hop(Root):
    """forward runs lines on t in the body of the higher-order op hop."""

    args = "t"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hop(self.body, x)


def stores(target: str, n: int) -> list[str]:
    return [f"{target}.v{i % 16} = {i}" for i in range(n)]


PURE = ["t = t * 1.0001 + 0.5"]
# Each case: its module, sized by n, and its input's shape.
WORKLOADS: dict[str, tuple[Any, tuple[int, ...]]] = {
    "root_setattr": (lambda n: Root(stores("self", n), "x + 1"), (4,)),
    # stores to registered buffers, which the fix checks outside store_attr
    "root_state_setattr": (
        lambda n: Root(
            [f"self.b{i % 4} = x + {i}" for i in range(n)], "x + self.b0", buffers=4
        ),
        (4,),
    ),
    "hop_body_wrap": (lambda n: Hop(PURE * n, "t", wrap), (3, 4)),
    "hop_body_map": (lambda n: Hop(PURE * n, "t", control_flow_map), (3, 4)),
    # n stores on a module the body creates: each asks the fix whether it may
    "hop_body_module": (
        lambda n: Hop(["m = Scratch()", *stores("m", n)], "t + m.v0", wrap),
        (3, 4),
    ),
    "mlp": (
        lambda n: nn.Sequential(
            *[m for _ in range(8) for m in (nn.Linear(64, 64), nn.ReLU())]
        ),
        (8, 64),
    ),
    "conv_net": (
        lambda n: nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(16, 10),
        ).eval(),
        (2, 3, 16, 16),
    ),
    "error_path": (lambda n: Issue126355(), (3, 2)),
}


def trace(case: str, n: int | None, begin: Any = None, end: Any = None) -> None:
    """One fresh trace of a case, begin() and end() around it."""
    make, shape = WORKLOADS[case]
    module, x = make(n or 0), torch.randn(shape)
    torch._dynamo.reset()
    compiled = torch.compile(module, backend="eager", fullgraph=(case == "error_path"))
    gc.collect()
    gc.disable()
    if begin:
        begin()
    try:
        compiled(x)
    except torch._dynamo.exc.TorchDynamoException:
        if case != "error_path":
            raise
    finally:
        if end:
            end()
        gc.enable()


if __name__ == "__main__":
    inline, cases, *library = sys.argv[1:]
    torch.set_num_threads(1)
    set_mode(inline == "1")
    ctl = ctypes.CDLL(library[0]) if library else None
    profiles = []
    for case, n in json.loads(cases):
        trace(case, n)  # imports and first-call caches, unmeasured
        if ctl:  # under callgrind: a dump per case
            trace(case, n, ctl.measure_begin, ctl.measure_end)
            continue
        profile = cProfile.Profile()
        trace(case, n, profile.enable, profile.create_stats)
        # calls per function by file and name: not by line, which a patch
        # moves, nor by a builtin's address, which the heap layout moves
        calls: dict[str, int] = {}
        for (path, _, name), (_, total, *_rest) in profile.stats.items():
            key = f"{path.rpartition('site-packages/')[2]}:{name.split(' at 0x')[0]}"
            calls[key] = calls.get(key, 0) + total
        profiles.append(calls)
    print(json.dumps(profiles))
