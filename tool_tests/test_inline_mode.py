"""torchpatch.inline_mode switches inlining for real, on the installed torch.

torch 2.6.0 and later ignore TORCHDYNAMO_INLINE_INBUILT_NN_MODULES, so these
tests read the config from inside a test run, both through the pytest
plugin and through the runner for unittest-style files. From 2.12 on the
config is a no-op and inlining is always on: there "0" must be refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

RUNNER = [sys.executable, "-m", "torchpatch.inline_mode"]
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


def modes() -> list[str]:
    proc = subprocess.run(
        [*RUNNER, "--modes"],
        env=_env(None), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout.split()


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
    return env


def run_probe(tmp_path: Path, value: str | None, how: str):
    """Run the probe test through the plugin or the runner; it writes the
    mode it sees to mode.txt."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(out=str(tmp_path / "mode.txt")))
    if how == "pytest":
        # The plugin is registered by installing torchpatch: no -p needed.
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   str(probe)]  # fmt: skip
    else:
        command = [*RUNNER, str(probe)]
    return subprocess.run(
        command, env=_env(value), cwd=tmp_path, capture_output=True, text=True
    )


def mode_inside(tmp_path: Path, value: str | None, how: str) -> str:
    out = tmp_path / "mode.txt"
    proc = run_probe(tmp_path, value, how)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = f"inline_inbuilt_nn_modules={out.read_text()}"
    # The plugin says nothing, and imports nothing, when the variable is unset.
    if value is not None or how == "runner":
        assert shown in proc.stdout + proc.stderr
    else:
        assert f"({ENV}=" not in proc.stdout + proc.stderr
    return out.read_text()


@pytest.mark.parametrize("how", ["pytest", "runner"])
@pytest.mark.parametrize("value, expected", [("0", "False"), ("1", "True")])
def test_variable_sets_the_config(tmp_path, how, value, expected):
    if value not in modes():
        pytest.skip(f"this torch has no mode {value}")
    assert mode_inside(tmp_path, value, how) == expected


def test_modes_are_both_or_always_inlined():
    assert modes() in (["0", "1"], ["1"])


@pytest.mark.parametrize("how", ["pytest", "runner"])
def test_off_is_refused_where_inlining_is_always_on(tmp_path, how):
    if "0" in modes():
        pytest.skip("this torch can switch inlining off")
    proc = run_probe(tmp_path, "0", how)
    assert proc.returncode != 0
    assert "always inlines nn modules" in proc.stdout + proc.stderr
    assert not (tmp_path / "mode.txt").exists()
    if how == "pytest":
        # pytest's usage error: one line, exit code 4, no traceback.
        assert proc.returncode == 4
        assert "INTERNALERROR" not in proc.stdout + proc.stderr
        assert [line for line in proc.stderr.splitlines() if line.strip()] == [
            f"ERROR: {ENV}=0: torch {torch_version()} always inlines nn modules"
        ]


def test_runner_prints_its_usage():
    proc = subprocess.run([*RUNNER, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: python -m torchpatch.inline_mode")


def torch_version() -> str:
    proc = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout.strip()


@pytest.mark.parametrize("how", ["pytest", "runner"])
def test_unset_variable_keeps_the_release_default(tmp_path, how):
    assert mode_inside(tmp_path, None, how) == release_default()


def test_bad_value_is_refused(tmp_path):
    proc = run_probe(tmp_path, "yes", "runner")
    assert proc.returncode != 0
    assert f"{ENV} must be 0 or 1, not 'yes'" in proc.stderr


def test_runner_does_not_import_a_torch_folder_of_the_working_directory(tmp_path):
    # `python -m` puts the working directory first on sys.path; in a PyTorch
    # source tree its torch/ would shadow the installed torch. The runner
    # puts the test file's folder there instead, as `python FILE` does.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('shadowed')\n")
    (tmp_path / "test").mkdir()
    probe = tmp_path / "test" / "test_probe.py"
    probe.write_text(PROBE.format(out=str(tmp_path / "mode.txt")))
    proc = subprocess.run(
        [*RUNNER, "test/test_probe.py"], env=_env(None), cwd=tmp_path,
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mode.txt").exists()
