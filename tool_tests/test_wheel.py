"""The user's package: `pip wheel .` holds torchpatch and its series, nothing
of the maintainers', and works installed, with no checkout anywhere."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from torchpatch import series
from torchpatch.targets import InstalledTorch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
         "--disable-pip-version-check", "-w", str(out), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    (built,) = out.glob("torchpatch-*.whl")
    return built


def test_the_wheel_holds_no_test_and_no_maintainer_code(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"torchpatch", next(t for t in top if t.endswith(".dist-info"))}
    assert not [
        n for n in names if Path(n).name.startswith("test_") or "fix_tests" in n
    ]
    assert not [n for n in names if "/rerere/" in n or n.endswith("/tests")]
    served = series.supported_versions(ROOT / "patches")
    assert {n.split("/")[3] for n in names if n.endswith("/series")} == {
        f"torch-{r}"
        for r in {series.load_series(ROOT / "patches", v).version for v in served}
    }


def test_the_installed_wheel_applies_and_exports_without_a_checkout(wheel, tmp_path):
    try:
        torch = InstalledTorch.find()
    except Exception:  # noqa: BLE001
        pytest.skip("needs a torch installed")
    target = tmp_path / "lib"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
         "--disable-pip-version-check", "--target", str(target), str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    # torch/_dynamo and the wheel's RECORD, as this venv has them, patched or not.
    site = tmp_path / "site-packages"
    shutil.copytree(torch.root / "torch" / "_dynamo", site / "torch" / "_dynamo")
    (dist_info,) = torch.root.glob("torch-*.dist-info")
    for name in ("METADATA", "RECORD"):
        (site / dist_info.name).mkdir(exist_ok=True)
        shutil.copyfile(dist_info / name, site / dist_info.name / name)
    away = tmp_path / "elsewhere"
    away.mkdir()

    def torchpatch(*args: str) -> str:
        proc = subprocess.run(
            # -S: no site-packages, so no editable install of this checkout.
            [sys.executable, "-S", "-m", "torchpatch", *args], cwd=away,
            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    where = ("--site-packages", str(site))
    assert "match the wheel's RECORD" in torchpatch("revert", *where) + torchpatch(
        "apply", *where
    ) + torchpatch("revert", *where)
    assert torchpatch("apply", *where).startswith("applied")
    out = away / "fix.patch"
    assert torchpatch("export", *where, str(out)).startswith(f"wrote {out}")
    assert str(target) in torchpatch("status", *where).splitlines()[1]
