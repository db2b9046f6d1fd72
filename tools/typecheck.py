"""mypy with upstream's settings on the files a series touches, following
their imports through torch, pristine against patched (docs/testing.md)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter

from tools.plumbing import BUILD, ROOT, STATES, installed_series, write_tree

# PyTorch's mypy.ini, less its plugins (not in a wheel) and the defaults it restates.
SETTINGS = """\
[mypy]
cache_dir = {work}/cache
python_executable = {python}
allow_redefinition = True
warn_unused_configs = True
warn_redundant_casts = True
show_column_numbers = True
check_untyped_defs = True
disallow_untyped_defs = True
disallow_untyped_decorators = True
local_partial_types = True
enable_error_code = possibly-undefined
python_version = 3.11

[mypy-torch._dynamo.*]
disallow_any_generics = True

[mypy-triton.*,sympy.*,matplotlib.*,numba.*,scipy.*,IPython.*]
ignore_missing_imports = True
"""
SOURCES = ("torch/**/*.py", "torch/**/*.pyi", "torch/**/py.typed")
MYPY = f"{ROOT}/.venvs/lint/bin/mypy"  # main's pin of mypy
ERROR = re.compile(r"^([^:\s]+):\d+:\d+: error: (.*)$", re.MULTILINE)


def mypy_errors(output: str) -> Counter[tuple[str, ...]]:
    """mypy's errors by file and message, not line: a patch moves lines."""
    return Counter(ERROR.findall(output))


def main() -> int:
    install, _ = installed_series()
    work = BUILD / "typecheck" / install.version
    tree = work / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    paths = write_tree(tree, "pristine", SOURCES)
    (tree / "mypy.ini").write_text(SETTINGS.format(work=work, python=sys.executable))
    errors: dict[str, Counter[tuple[str, ...]]] = {}
    seconds: dict[str, int] = {}
    for state in STATES:  # the patched run reuses the pristine run's cache
        write_tree(tree, state)
        start = time.monotonic()
        proc = subprocess.run([MYPY, *paths], cwd=tree, capture_output=True, text=True)
        seconds[state] = round(time.monotonic() - start)
        if proc.returncode not in (0, 1):  # 2: mypy itself failed
            raise SystemExit(f"typecheck: mypy failed: {proc.stderr.strip()[-500:]}")
        errors[state] = mypy_errors(proc.stdout)
    new = errors["patched"] - errors["pristine"]
    totals = {state: sum(errors[state].values()) for state in STATES}
    by_file = {s: Counter(path for path, _ in errors[s].elements()) for s in STATES}
    files = {path: {s: by_file[s][path] for s in STATES} for path in paths}
    print(
        f"typecheck, torch {install.version} series: {len(new)} new mypy errors "
        f"({totals['pristine']} in the wheel's tree, {totals['patched']} patched; "
        f"{seconds['pristine']} s pristine, {seconds['patched']} s patched)"
    )
    for (path, text), n in sorted(new.items()):
        print(f"typecheck: {path}: {text}" + (f" (x{n})" if n > 1 else ""))
    lines = [f"{path}: {text}" for (path, text) in sorted(new)]
    record = dict(
        torch=install.version, files=files, errors=totals, new=lines, seconds=seconds
    )
    (work / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
