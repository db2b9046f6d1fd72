"""Run torchpatch in a process that is SIGKILLed right after its first write.

Nothing is cleaned up or rolled back: the files are left exactly as a
crash or a Ctrl-\\ between two renames leaves them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from fakes import SRC

_KILLED_AFTER_FIRST_WRITE = """\
import os, signal, sys
from torchpatch import writes
from torchpatch.cli import main

real_replace = writes._replace


def replace(file, data):
    real_replace(file, data)
    os.kill(os.getpid(), signal.SIGKILL)


writes._replace = replace
sys.exit(main(sys.argv[1:]))
"""


def torchpatch_killed_after_first_write(*args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_FIRST_WRITE, *args],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr


_KILLED_BEFORE_RENAME = """\
import os, signal, sys
from torchpatch import writes
from torchpatch.cli import main

calls = [0]
real_replace = os.replace


def replace(src, dst):
    calls[0] += 1
    if calls[0] == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)


writes.os.replace = replace
sys.exit(main(sys.argv[2:]))
"""


def torchpatch_killed_before_rename(number: int, *args: str) -> bool:
    """torchpatch args, SIGKILLed as its write number `number` has written
    its temporary file and not yet renamed it; whether it was killed (a
    command with fewer writes finishes)."""
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_RENAME, str(number), *args],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
    return proc.returncode == -signal.SIGKILL
