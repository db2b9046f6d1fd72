"""mypy on what a series changes, with upstream's settings: no new error.

For the torch of this interpreter and its series, copies torch's Python
sources (.py, .pyi, py.typed) as the wheel has them (plumbing.write_tree,
whatever state the venv is in), runs mypy on the .py files the series
touches under torch/, writes those files as the series leaves them and runs
mypy again (incrementally, on one cache). mypy follows
every import into the rest of torch, as upstream's `files = torch` does, so
an error the series causes in a file it does not touch counts too.

An error counts as new when the patched tree has more of it (same file,
code and message, wherever the line) than the wheel's tree. The wheel's own
errors are many (a release wheel is not the tree upstream's CI checks, and
mypy 1.16.0 is main's pin, not the release's); they are reported, not the
series' to fix.

The settings are the [mypy] section of PyTorch's mypy.ini and its
`[mypy-torch._dynamo.*] disallow_any_generics`, as the search index stores
that file (a documentation page of it, text id 6370363499; no commit
recorded), without its plugins (mypy_plugins/ is not in a wheel) and with
`ignore_missing_imports` for the third-party modules torch imports that it
lists. mypy's version is the one main's .ci/docker/requirements-ci.txt pins
(checked at 00062d375bf35995afc6562293d9fdff20052900), in .venvs/lint.

    python -m tools.typecheck       # with a release venv's python
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tools.plumbing import BUILD, ROOT, installed_series, write_tree

WORK = BUILD / "typecheck"  # a folder per release
MYPY = ROOT / ".venvs" / "lint" / "bin" / "mypy"
SOURCES = ("torch/**/*.py", "torch/**/*.pyi", "torch/**/py.typed")
UNTYPED_THIRD_PARTY = ("triton", "sympy", "matplotlib", "numba", "scipy", "IPython")
SETTINGS = """\
[mypy]
cache_dir = {cache}
allow_redefinition = True
warn_unused_configs = True
warn_redundant_casts = True
show_error_codes = True
show_column_numbers = True
check_untyped_defs = True
disallow_untyped_defs = True
disallow_untyped_decorators = True
follow_imports = normal
local_partial_types = True
enable_error_code = possibly-undefined
warn_unused_ignores = False
python_version = 3.11

[mypy-torch._dynamo.*]
disallow_any_generics = True
"""
# path:line:col: error: message  [code]
_ERROR = re.compile(r"^(?P<path>[^:\s]+):\d+:\d+: error: (?P<text>.*)$")

Errors = Counter[tuple[str, str]]  # (path, message) -> count


def write_config(work: Path) -> Path:
    config = work / "mypy.ini"
    text = SETTINGS.format(cache=work / "cache")
    for module in UNTYPED_THIRD_PARTY:
        text += f"\n[mypy-{module}.*]\nignore_missing_imports = True\n"
    config.write_text(text)
    return config


def mypy(tree: Path, config: Path, paths: list[str]) -> tuple[Errors, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [MYPY, "--config-file", config, "--python-executable", sys.executable,
         *paths],
        cwd=tree, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode not in (0, 1):  # 2: mypy itself failed
        raise SystemExit(f"typecheck: mypy failed: {proc.stderr.strip()[-500:]}")
    found: Errors = Counter()
    for line in proc.stdout.splitlines():
        match = _ERROR.match(line)
        if match:
            found[(match["path"], match["text"])] += 1
    return found, time.monotonic() - start


def main() -> int:
    install, _ = installed_series()
    work = WORK / install.version
    tree = work / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    config = write_config(work)
    paths = write_tree(tree, "pristine", SOURCES)
    pristine, pristine_time = mypy(tree, config, paths)
    write_tree(tree, "patched")
    patched, patched_time = mypy(tree, config, paths)

    new = patched - pristine
    per_file = {
        path: {
            "pristine": sum(n for (p, _), n in pristine.items() if p == path),
            "patched": sum(n for (p, _), n in patched.items() if p == path),
        }
        for path in paths
    }
    for path, counts in per_file.items():
        print(
            f"typecheck, torch {install.version}: {path}: "
            f"{counts['pristine']} errors pristine, {counts['patched']} patched"
        )
    print(
        f"typecheck, torch {install.version} series: {len(new)} new mypy errors "
        f"({sum(pristine.values())} in the wheel's tree, {sum(patched.values())} "
        f"patched; {pristine_time:.0f} s pristine, {patched_time:.0f} s patched)"
    )
    for (path, text), n in sorted(new.items()):
        print(f"typecheck: {path}: {text}" + (f" (x{n})" if n > 1 else ""))
    (work / "results.json").write_text(
        json.dumps(
            {
                "torch": install.version,
                "files": per_file,
                "errors": {
                    "pristine": sum(pristine.values()),
                    "patched": sum(patched.values()),
                },
                "new": [f"{p}: {t}" for (p, t) in sorted(new)],
                "seconds": {
                    "pristine": round(pristine_time),
                    "patched": round(patched_time),
                },
            },
            indent=1,
        )
        + "\n"
    )
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
