"""PyTorch issue 126355 before and after the fix, on this venv's torch: the
issue's reproducer and other ways to write the same mutation in a
control_flow.map body, compiled with fullgraph=True in each inlining mode,
pristine and patched, each in a process of its own. `make pr` shows the table.

    python -m tools.demo               # make demo
    python -m tools.demo --forms 0|1   # this venv's errors in a mode, as JSON
"""

from __future__ import annotations

import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.plumbing import BUILD, ROOT, run, venv_states
from torchpatch.inline_mode import modes

WIDTH = 200  # characters of a message shown
Error = dict[str, Any]  # a form's: type, message, untraced_at_root
# form: (module of fix_tests/_hop_mutation_test_utils.py, its arguments).
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
    """The message's first line, and a graph break's start of explanation."""
    text = str(error)
    _, found, graph_break = text.partition("Got graph break/error:\n\n")
    lines = (graph_break if found else text).splitlines()
    for line in lines:
        if line.strip().startswith("Explanation: "):
            first = re.split(r"(?<=\.) ", line.strip().removeprefix("Explanation: "))
            return f"{lines[0]}: {first[0]}"
    return lines[0]


def first_errors(inline: str) -> dict[str, Error]:
    """{form: its error}, compiled in this process in the given mode."""
    import torch

    from fix_tests import _hop_mutation_test_utils as modules
    from torchpatch.inline_mode import set_mode

    set_mode(inline == "1")
    errors = {}
    for form, (kind, *args) in FORMS.items():
        # A change this Dynamo does not trace even at the root keeps its error.
        root = modules.untraced_at_root(args[1], inline == "1") if args else False
        errors[form] = {"type": "(no error)", "message": "", "untraced_at_root": root}
        try:
            torch._dynamo.reset()
            model = getattr(modules, kind)(*args)
            torch.compile(model, backend="eager", fullgraph=True)(torch.randn(3, 2))
        except Exception as e:  # noqa: BLE001
            errors[form] |= {"type": type(e).__name__, "message": summary(e)}
    return errors


def errors(python: Path, inline: str) -> dict[str, Error]:
    """first_errors with python, in a process of its own."""
    out = run([python, "-m", "tools.demo", "--forms", inline], cwd=ROOT)
    found: dict[str, Error] = json.loads(out.strip().splitlines()[-1])
    return found


def one_error(found: dict[tuple[str, str], dict[str, Error]]) -> tuple[bool, str]:
    """Whether, patched, every form and mode gives one exception type and one
    kind of message (before the names it gives), but for the forms this
    Dynamo cannot trace even at the root, which keep their pristine error."""
    kinds, kept = set(), set()
    for (state, inline), by_form in found.items():
        if state == "pristine":
            continue
        for form, e in by_form.items():
            if not e["untraced_at_root"]:
                kinds.add((e["type"], e["message"].split(":")[0]))
            elif e != found["pristine", inline][form]:
                return False, f"{form!r} is not traced at the root, yet changed"
            else:
                kept.add(form)
    if len(kinds) != 1:
        return False, "the forms or modes still differ"
    root = (
        f"; as at the root, Dynamo's own for: {', '.join(sorted(kept))}" if kept else ""
    )
    return True, f"one error for every form and mode: {' '.join(kinds.pop())}{root}"


def main() -> int:
    with venv_states(BUILD / "demo") as pythons:
        found = {
            (state, inline): errors(python, inline)
            for state, python in pythons.items()
            for inline in modes()
        }
    print(
        f"PyTorch issue 126355 on torch {metadata.version('torch')}: an outer "
        "module mutated in a\ncontrol_flow.map body, fullgraph=True"
    )
    for inline in modes():
        for form in FORMS:
            print(f"\n{form}   (inlining {'on' if inline == '1' else 'off'})")
            for state in ("pristine", "patched"):
                text = "{type}: {message}".format(**found[state, inline][form])
                shown = text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."
                print(f"  {state:<9}{shown}")
    ok, verdict = one_error(found)
    print(f"\npatched: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--forms"]:
        print(json.dumps(first_errors(sys.argv[2])))
        sys.exit(0)
    sys.exit(main())
