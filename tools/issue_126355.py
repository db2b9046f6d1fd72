"""The reproducer of PyTorch issue 126355, shared by the demo and the benchmark.

`Module` is the issue's reproducer: `self.w += 1` inside control_flow.map.
FORMS are other ways to write the same mistake in the same body. Run as a
script (`issue_126355.py 0|1`: inlining off or on), it compiles each with
fullgraph=True and prints the errors as JSON: {form: {"type": ...,
"message": ...}}, the message being what names the problem: the first line,
and on 2.11+ the graph break's type and the start of its explanation.
"""

from __future__ import annotations

import json
import re
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


def _iadd_buffer(m):
    m.buf += 1


def _rebind_int(m):
    m.n = m.n + 1


def _new_attribute(m):
    m.fresh = 1


def _delete(m):
    del m.w


def _eval(m):
    m.sub.eval()


FORMS = {
    "self.buf += 1": _iadd_buffer,
    "self.n = self.n + 1": _rebind_int,
    "self.fresh = 1": _new_attribute,
    "del self.w": _delete,
    "self.sub.eval()": _eval,
}


class Forms(Module):
    def __init__(self, mutate):
        super().__init__()
        self.register_buffer("buf", torch.zeros(1))
        self.n = 0
        self.sub = torch.nn.Linear(2, 2)
        self.mutate = mutate

    def forward(self, xs):
        def body(x):
            self.mutate(self)
            return x

        return control_flow_map(body, xs)


def summary(error: Exception) -> str:
    text = str(error)
    _, found, graph_break = text.partition("Got graph break/error:\n\n")
    lines = (graph_break if found else text).splitlines()
    explanation = next(
        (line.strip() for line in lines if line.strip().startswith("Explanation: ")),
        None,
    )
    if explanation is None:
        return lines[0]
    first = re.split(r"(?<=\.) ", explanation.removeprefix("Explanation: "))[0]
    return f"{lines[0]}: {first}"


def first_error(module: torch.nn.Module | None = None) -> dict:
    module = Module() if module is None else module
    try:
        torch._dynamo.reset()
        compiled = torch.compile(module, backend="eager", fullgraph=True)
        compiled(torch.randn(3, 2))
    except Exception as e:  # noqa: BLE001
        return {"type": type(e).__name__, "message": summary(e)}
    return {"type": "(no error)", "message": ""}


def all_errors() -> dict:
    errors = {"self.w += 1 (the issue)": first_error()}
    for form, mutate in FORMS.items():
        errors[form] = first_error(Forms(mutate))
    return errors


if __name__ == "__main__":
    from torchpatch.inline_mode import set_mode

    set_mode(sys.argv[1] == "1")
    print(json.dumps(all_errors()))
