"""PyTorch issue 126355 before and after the fix, for the torch of this venv.

The issue's reproducer (`self.w += 1` in a control_flow.map body) and other
ways to write the same mistake in the same body (FORMS, built from the fix's
tests' modules in fix_tests/_hop_mutation_test_utils.py), each compiled with
fullgraph=True in each inlining mode the release has, in a pristine and a
patched copy of this venv (plumbing.venv_states), each run in a process of
its own. Prints, for each form and mode, the exception and what its message
says: the first line, and from 2.11 on the graph break's type and the start
of its explanation. `make pr` puts the same table in the pull request.

    python -m tools.demo               # make demo
    python -m tools.demo --forms 0|1   # one state and mode: the errors as JSON
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.plumbing import BUILD, ROOT, run, venv_states
from torchpatch.inline_mode import modes

WIDTH = 200  # characters of a message shown
# form: (kind of module, HOP, what its body does, to what), as the tests build it.
FORMS = {
    "self.w += 1 (the issue)": ("Issue126355",),
    "self.buf += 1": ("Model", "map", "iadd_buffer", "self"),
    "self.n = self.n + 1": ("Model", "map", "rebind_int", "self"),
    "self.fresh = 1": ("Model", "map", "new_attribute", "self"),
    "del self.w": ("Model", "map", "delete_attribute", "self"),
    "self.lin.eval()": ("Model", "map", "eval", "linear"),
    'self.register_buffer("buf2", t)': ("StateModel", "map", "register_buffer"),
    'self.add_module("extra", m)': ("StateModel", "map", "add_module"),
    "self.layers.append(m)": ("StateModel", "map", "module_list_append"),
    'self.__dict__["n"] = 11': ("StateModel", "map", "dunder_dict_setitem"),
    'self._buffers["buf"] = t': ("StateModel", "map", "buffers_setitem"),
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


def first_errors(inline: str) -> dict[str, dict[str, str]]:
    """{form: its error}, compiled in this process with the given mode."""
    import torch

    from fix_tests import _hop_mutation_test_utils as modules
    from torchpatch.inline_mode import set_mode

    set_mode(inline == "1")
    errors = {}
    for form, (kind, *args) in FORMS.items():
        make: Callable[..., torch.nn.Module] = getattr(modules, kind)
        try:
            torch._dynamo.reset()
            torch.compile(make(*args), backend="eager", fullgraph=True)(
                torch.randn(3, 2)
            )
            errors[form] = {"type": "(no error)", "message": ""}
        except Exception as e:  # noqa: BLE001
            errors[form] = {"type": type(e).__name__, "message": summary(e)}
    return errors


def errors(python: Path, inline: str) -> dict[str, dict[str, str]]:
    """first_errors with python, in a process of its own."""
    out = run([python, "-m", "tools.demo", "--forms", inline], cwd=ROOT)
    found: dict[str, dict[str, str]] = json.loads(out.strip().splitlines()[-1])
    return found


def shown(error: dict[str, Any]) -> str:
    text = f"{error['type']}: {error['message']}"
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def main() -> int:
    with venv_states(BUILD / "demo") as pythons:
        found = {(state, inline): errors(python, inline)
                 for state, python in pythons.items() for inline in modes()}  # fmt: skip
    print(f"PyTorch issue 126355 on torch {metadata.version('torch')}: an outer "
          "module mutated in a\ncontrol_flow.map body, fullgraph=True")  # fmt: skip
    for inline in modes():
        for form in FORMS:
            print(f"\n{form}   (inlining {'on' if inline == '1' else 'off'})")
            for state in ("pristine", "patched"):
                print(f"  {state:<9}{shown(found[state, inline][form])}")
    # One exception type and one kind of message: the part before the
    # attribute and module it names.
    kinds = {(e["type"], e["message"].split(":")[0])
             for (state, _), found_errors in found.items() if state == "patched"
             for e in found_errors.values()}  # fmt: skip
    if len(kinds) == 1:
        print(f"\npatched: one error for every form and mode: {' '.join(kinds.pop())}")
        return 0
    print("\npatched: the forms or modes still differ")
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--forms"]:
        print(json.dumps(first_errors(sys.argv[2])))
        sys.exit(0)
    sys.exit(main())
