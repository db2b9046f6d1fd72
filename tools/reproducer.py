"""The errors of PyTorch issue 126355's reproducer, for the demo and the PR.

The reproducer (`self.w += 1` inside control_flow.map) and the other ways
to write the same mistake in the same body (FORMS) are the fix's tests'
(fix_tests/_hop_mutation_test_utils.py). Run in a process of its own,
`python -m tools.reproducer 0|1` (inlining off or on) compiles each with
fullgraph=True and prints the errors as JSON: {form: {"type": ...,
"message": ...}}, the message being what names the problem: the first
line, and on 2.11+ the graph break's type and the start of its explanation.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable

import torch

from fix_tests._hop_mutation_test_utils import Issue126355, Model, StateModel
from torchpatch.inline_mode import set_mode

# form: the module that writes it in a control_flow.map body.
FORMS: dict[str, Callable[[], torch.nn.Module]] = {
    "self.w += 1 (the issue)": Issue126355,
    "self.buf += 1": lambda: Model("map", "iadd_buffer", "self"),
    "self.n = self.n + 1": lambda: Model("map", "rebind_int", "self"),
    "self.fresh = 1": lambda: Model("map", "new_attribute", "self"),
    "del self.w": lambda: Model("map", "delete_attribute", "self"),
    "self.lin.eval()": lambda: Model("map", "eval", "linear"),
    'self.register_buffer("buf2", t)': lambda: StateModel("map", "register_buffer"),
    'self.add_module("extra", m)': lambda: StateModel("map", "add_module"),
    "self.layers.append(m)": lambda: StateModel("map", "module_list_append"),
    'self.__dict__["n"] = 11': lambda: StateModel("map", "dunder_dict_setitem"),
    'self._buffers["buf"] = t': lambda: StateModel("map", "buffers_setitem"),
}


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


def first_error(module: torch.nn.Module) -> dict[str, str]:
    try:
        torch._dynamo.reset()
        compiled = torch.compile(module, backend="eager", fullgraph=True)
        compiled(torch.randn(3, 2))
    except Exception as e:  # noqa: BLE001
        return {"type": type(e).__name__, "message": summary(e)}
    return {"type": "(no error)", "message": ""}


def all_errors() -> dict[str, dict[str, str]]:
    return {form: first_error(make()) for form, make in FORMS.items()}


if __name__ == "__main__":
    set_mode(sys.argv[1] == "1")
    print(json.dumps(all_errors()))
