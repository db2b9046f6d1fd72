"""The real series on the real torch of this interpreter (the project's .venv).

Leaves the install as it found it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from killed import torchpatch_killed_after_first_write, torchpatch_killed_before_rename

from tools import series_tests
from torchpatch import bundle, series
from torchpatch.cli import main
from torchpatch.targets import InstalledTorch

try:
    TORCH = InstalledTorch.find()
except Exception:  # noqa: BLE001
    TORCH = None
SERIES_ROOT = bundle.data_root() / "patches"
SUPPORTED = series.supported_versions(SERIES_ROOT)

pytestmark = pytest.mark.skipif(
    TORCH is None or TORCH.version not in SUPPORTED,
    reason=f"needs one of torch {', '.join(SUPPORTED)} installed",
)

# What each series may touch: the Dynamo files of the fix, the graph break
# registry (2.11+) and the upstream test of #126355.
ALLOWED = {
    "torch/_dynamo/side_effects.py",
    "torch/_dynamo/variables/builtin.py",
    "torch/_dynamo/variables/nn_module.py",
    "torch/_dynamo/variables/higher_order_ops.py",
    "torch/_dynamo/variables/misc.py",
    "torch/_dynamo/graph_break_registry.json",
    # The 2.13+ series add SubgraphTracer.outer_changes, and have the list
    # and dict methods record a change before they make it.
    "torch/_dynamo/output_graph.py",
    "torch/_dynamo/variables/lists.py",
    "torch/_dynamo/variables/dicts.py",
    "test/dynamo/test_misc.py",
    "test/dynamo/test_autograd_function.py",
    "test/dynamo/_test_misc_part4.py",
    "test/dynamo/_higher_order_ops_test_core.py",
    "test/higher_order_ops/test_invoke_subgraph.py",
}


def touched_torch_files() -> list[str]:
    found = series.load_series(SERIES_ROOT, TORCH.version)
    return [f for f in found.files if f.startswith("torch/")]


def dynamo_sources() -> dict[str, bytes]:
    return {
        p.as_posix(): p.locate().read_bytes()
        for p in metadata.files("torch")
        if p.as_posix().startswith("torch/_dynamo/") and p.suffix in (".py", ".json")
    }


@pytest.fixture
def real_install(capsys):
    was_applied = _state(capsys) == "applied"
    yield TORCH
    main(["apply" if was_applied else "revert"])
    capsys.readouterr()


def replace(file: Path, data: bytes) -> None:
    """Write a new file over file, never into its inode."""
    tmp = file.with_name(file.name + ".test-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, file)


def _state(capsys) -> str:
    capsys.readouterr()
    main(["status", "--json"])
    return json.loads(capsys.readouterr().out)["state"]


def test_apply_revert_cycle_on_the_real_install(real_install, capsys):
    assert main(["revert"]) == 0
    for path, data in dynamo_sources().items():
        assert real_install.matches_record(path, data), path
    assert _state(capsys) == "pristine"

    assert main(["apply"]) == 0
    first = dynamo_sources()
    capsys.readouterr()
    assert main(["apply"]) == 0
    assert capsys.readouterr().out.startswith("already applied")
    assert main(["revert"]) == 0
    assert main(["apply"]) == 0
    assert dynamo_sources() == first
    assert _state(capsys) == "applied"


def test_modified_real_file_is_refused(real_install, capsys):
    main(["apply"])
    target = real_install.root / "torch/_dynamo/side_effects.py"
    patched = target.read_bytes()
    try:
        replace(target, patched + b"# local edit\n")
        assert main(["revert"]) == 1
        assert "torch/_dynamo/side_effects.py" in capsys.readouterr().err
        assert target.read_bytes() == patched + b"# local edit\n"
    finally:
        replace(target, patched)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_export_applies_to_the_wheel_sources(real_install, tmp_path, capsys):
    # The wheel's torch/ is the release's torch/; PyTorch's own test files
    # are not in the wheel, so their hunks are left out of this check.
    main(["revert"])
    tree = tmp_path / "pytorch"
    for path in touched_torch_files():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real_install.root / path, tree / path)
    out = tmp_path / "upstream.patch"
    assert main(["export", "--torch-version", TORCH.version, str(out)]) == 0
    subprocess.run(
        ["git", "apply", "--include=torch/*", str(out)], cwd=tree, check=True
    )
    main(["apply"])
    for path in touched_torch_files():
        assert (tree / path).read_bytes() == (real_install.root / path).read_bytes()
    capsys.readouterr()


@pytest.mark.parametrize("version", SUPPORTED)
def test_patch_only_touches_what_the_issue_allows(version):
    found = series.load_series(SERIES_ROOT, version)
    assert "torch/_dynamo/side_effects.py" in found.files
    # A test commit may create the test file the pull request adds.
    carried = {test.upstream for test in series_tests.exported(found)}
    assert set(found.files) <= ALLOWED | carried
    assert series_tests.tests(found)


def test_killed_apply_and_revert_are_completed(real_install, capsys):
    main(["apply"])
    patched = dynamo_sources()
    main(["revert"])
    for command, then in (("apply", "revert"), ("revert", "apply")):
        if command == "revert":
            main(["apply"])
        torchpatch_killed_after_first_write(command)
        assert _state(capsys) == "partially applied"
        assert main([then]) == 0
        if then == "apply":
            assert dynamo_sources() == patched
        else:
            for path, data in dynamo_sources().items():
                assert real_install.matches_record(path, data), path


def test_apply_killed_before_a_rename_leaves_nothing_after_revert(real_install, capsys):
    # Killed at each of its writes in turn, between writing a file's new copy
    # and renaming it into place: status names the copy it left, and revert
    # leaves the folders exactly the wheel's, its RECORD and nothing else.
    main(["revert"])
    capsys.readouterr()
    folders = {(real_install.root / p).parent for p in touched_torch_files()}
    for number in range(1, len(touched_torch_files()) + 1):
        assert torchpatch_killed_before_rename(number, "apply")
        main(["status", "--json"])
        strays = json.loads(capsys.readouterr().out)["stray_files"]
        assert len(strays) == 1 and strays[0].endswith(".tmp"), strays
        assert main(["revert"]) == 0
        assert f"removed what a killed run left: {strays[0]}" in capsys.readouterr().out
        for folder in folders:
            for file in folder.iterdir():
                relpath = file.relative_to(real_install.root).as_posix()
                if file.is_file():
                    assert real_install.matches_record(relpath, file.read_bytes()), (
                        relpath
                    )
    capsys.readouterr()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_exported_tests_import_on_their_release(real_install, tmp_path, capsys):
    # The pull request's test files for this release (the series' export
    # with its tests), which must import (and collect) with this torch, on
    # their own.
    found = series.load_series(SERIES_ROOT, TORCH.version)
    out = tmp_path / "fix.patch"
    out.write_bytes(series_tests.with_tests(found))
    tree = tmp_path / "tree"
    tree.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    subprocess.run(
        ["git", "apply", "--include=test/dynamo/*hop_mutation*", str(out)],
        cwd=tree,
        check=True,
    )
    runs = [t.upstream for t in series_tests.exported(found) if t.runs]
    assert runs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--collect-only", *runs],
        cwd=tree, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " tests collected" in proc.stdout or " test collected" in proc.stdout
    capsys.readouterr()
