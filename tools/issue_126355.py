"""The reproducer of PyTorch issue 126355, shared by the demo and the benchmark.

Run as a script (`issue_126355.py 0|1`: inlining off or on), it compiles the
module with fullgraph=True and prints the error as JSON:
{"type": ..., "message": <first line>}.
"""

from __future__ import annotations

import json
import sys

import torch
from functorch.experimental.control_flow import map as control_flow_map


class Module(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.tensor(1)

    def forward(self, xs):
        def body(x):
            self.w += 1
            return x

        return control_flow_map(body, xs)


def first_error(inline: bool) -> dict:
    try:
        with torch._dynamo.config.patch(inline_inbuilt_nn_modules=inline):
            compiled = torch.compile(Module(), backend="eager", fullgraph=True)
            compiled(torch.randn(3, 2))
    except Exception as e:  # noqa: BLE001
        return {"type": type(e).__name__, "message": str(e).splitlines()[0]}
    return {"type": "(no error)", "message": ""}


if __name__ == "__main__":
    print(json.dumps(first_error(sys.argv[1] == "1")))
