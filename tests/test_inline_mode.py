"""tools/inline_mode.py switches inlining for real, on the installed torch.

torch 2.6.0 and later ignore TORCHDYNAMO_INLINE_INBUILT_NN_MODULES, so these
tests read the config from inside a test run, both through the pytest
plugin and through the runner for unittest-style files.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

TOOLS = Path(__file__).resolve().parents[1] / "tools"
ENV = "TORCHDYNAMO_INLINE_INBUILT_NN_MODULES"
PROBE = """\
import unittest

import torch._dynamo.config


class Probe(unittest.TestCase):
    def test_mode(self):
        with open({out!r}, "w") as f:
            f.write(str(torch._dynamo.config.inline_inbuilt_nn_modules))


if __name__ == "__main__":
    unittest.main()
"""


def release_default() -> str:
    proc = subprocess.run(
        [sys.executable, "-c", "import torch._dynamo.config as c;"
         "print(c.inline_inbuilt_nn_modules)"],
        env=_env(None), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout.strip()


def _env(value: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if value is not None:
        env[ENV] = value
    env["PYTHONPATH"] = str(TOOLS)
    return env


def mode_inside(tmp_path: Path, value: str | None, how: str) -> str:
    out = tmp_path / "mode.txt"
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(out=str(out)))
    if how == "pytest":
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-p", "inline_mode", str(probe)]  # fmt: skip
    else:
        command = [sys.executable, str(TOOLS / "inline_mode.py"), str(probe)]
    proc = subprocess.run(
        command, env=_env(value), cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = f"inline_inbuilt_nn_modules={out.read_text()}"
    assert shown in proc.stdout + proc.stderr
    return out.read_text()


@pytest.mark.parametrize("how", ["pytest", "runner"])
@pytest.mark.parametrize("value, expected", [("0", "False"), ("1", "True")])
def test_variable_sets_the_config(tmp_path, how, value, expected):
    assert mode_inside(tmp_path, value, how) == expected


@pytest.mark.parametrize("how", ["pytest", "runner"])
def test_unset_variable_keeps_the_release_default(tmp_path, how):
    assert mode_inside(tmp_path, None, how) == release_default()


def test_bad_value_is_refused(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(out=str(tmp_path / "mode.txt")))
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "inline_mode.py"), str(probe)],
        env=_env("yes"), capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode != 0
    assert f"{ENV} must be 0 or 1, not 'yes'" in proc.stderr
