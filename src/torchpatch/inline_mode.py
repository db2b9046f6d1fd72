"""Make TORCHDYNAMO_INLINE_INBUILT_NN_MODULES mean what it says on every torch.

torch 2.4 reads the variable when torch._dynamo.config is imported; from
2.6.0 on, config.inline_inbuilt_nn_modules is `not is_fbcode()` and the
variable is ignored, so `TORCHDYNAMO_INLINE_INBUILT_NN_MODULES=0 pytest ...`
silently runs with inlining on. From 2.12 on the config is a deprecated
no-op (modules are always inlined): there is one mode, "1", and asking for
"0" is an error. This module sets the config from the variable ("0" or "1";
unset keeps the release's default) before any test module is imported:

- as a pytest plugin, which installing torchpatch registers: with the
  variable set, `TORCHDYNAMO_INLINE_INBUILT_NN_MODULES=0 pytest ...` runs
  with inlining off and the session's summary names the mode in force at
  its end; with it unset the plugin does nothing (it does not import torch);
- as a runner for unittest-style files, the way PyTorch's CI runs them:
  `python -m torchpatch.inline_mode test/dynamo/test_misc.py -k ...`;
- `python -m torchpatch.inline_mode --modes` prints the modes this torch has.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import Any

ENV = "TORCHDYNAMO_INLINE_INBUILT_NN_MODULES"
USAGE = f"""\
usage: python -m torchpatch.inline_mode TEST_FILE [ARGS...] | --modes | --help

Runs TEST_FILE as `python TEST_FILE ARGS...` would, with
torch._dynamo.config.inline_inbuilt_nn_modules set from {ENV}
(0 or 1; unset keeps the release's default). --modes prints the modes this
torch has. As a pytest plugin, {ENV}=0|1 pytest ... does the same."""


def requested() -> bool | None:
    value = os.environ.get(ENV)
    if value is None:
        return None
    if value not in ("0", "1"):
        raise SystemExit(f"{ENV} must be 0 or 1, not {value!r}")
    return value == "1"


def switchable() -> bool:
    """Whether config.inline_inbuilt_nn_modules still switches a mode."""
    import torch._dynamo.config as config

    entry = config._config.get("inline_inbuilt_nn_modules")
    return entry is not None and not getattr(entry, "deprecated", False)


def modes() -> list[str]:
    """The values of the variable that select a mode of this torch."""
    return ["0", "1"] if switchable() else ["1"]


def set_mode(inline: bool) -> None:
    """Switch inlining on or off, where this torch still can."""
    import torch
    import torch._dynamo.config as config

    if switchable():
        config.inline_inbuilt_nn_modules = inline
    elif not inline:
        raise SystemExit(
            f"{ENV}=0: torch {torch.__version__} always inlines nn modules"
        )


def apply() -> bool:
    """Set the config from the variable; return the mode now in force."""
    import torch._dynamo.config as config

    wanted = requested()
    if wanted is not None:
        set_mode(wanted)
    return config.inline_inbuilt_nn_modules if switchable() else True


def describe() -> str:
    import torch

    inline = apply()
    always = "" if switchable() else ", always"
    return (
        f"torch {torch.__version__}: "
        f"torch._dynamo.config.inline_inbuilt_nn_modules={inline}{always} "
        f"({ENV}={os.environ.get(ENV, '<unset>')})"
    )


def pytest_configure(config: Any) -> None:
    import pytest

    try:
        if requested() is None:
            return
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise SystemExit(f"{ENV} is set, but torch is not installed")
        apply()
    except SystemExit as refused:
        # A mode this torch cannot run: pytest's usage error, one line.
        raise pytest.UsageError(str(refused)) from None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if requested() is not None:
        terminalreporter.write_line(describe())


def main(argv: list[str]) -> None:
    # Import torch as `python TEST_FILE` would: with the file's folder first
    # on sys.path, not the working directory that `python -m` puts there (in
    # a PyTorch source tree, its torch/ would shadow the installed torch).
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    if len(argv) < 2:
        raise SystemExit(USAGE)
    if argv[1] in ("-h", "--help"):
        print(USAGE)
        return
    if argv[1] == "--modes":
        print(" ".join(modes()))
        return
    script = Path(argv[1])
    if not script.is_file():
        raise SystemExit(f"python -m torchpatch.inline_mode: no such file: {script}")
    sys.path.insert(0, str(script.resolve().parent))
    print(describe(), file=sys.stderr)
    sys.argv = argv[1:]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv)
