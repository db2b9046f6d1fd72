import subprocess
from pathlib import Path

from tools import no_copies

UPSTREAM_TEXT = "".join(
    f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(60)
)


def project(tmp_path: Path) -> tuple[Path, Path]:
    root, upstream = tmp_path / "repo", tmp_path / "upstream"
    (upstream / "test" / "dynamo").mkdir(parents=True)
    (upstream / "test" / "dynamo" / "test_misc.py").write_text(UPSTREAM_TEXT)
    (root / "patches" / "torch-2.14.1" / "rerere" / "abc").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root, upstream


def track(root: Path, name: str, text: str) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)
    subprocess.run(["git", "add", name], cwd=root, check=True)


def test_small_diffs_and_own_files_pass(tmp_path: Path) -> None:
    root, upstream = project(tmp_path)
    entry = "patches/torch-2.14.1/rerere/abc/"
    track(
        root, entry + "preimage.diff", "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    track(root, "fix_tests/test_x.py", UPSTREAM_TEXT[:500] + "# ours\n")
    assert no_copies.problems(root, upstream) == []


def test_a_whole_image_or_a_copied_test_fails(tmp_path: Path) -> None:
    root, upstream = project(tmp_path)
    track(root, "patches/torch-2.14.1/rerere/abc/preimage", "<<<<<<<\na\n=======\n")
    track(root, "fix_tests/test_copy.py", "# header\n" + UPSTREAM_TEXT)
    found = no_copies.problems(root, upstream)
    assert found[0] == "patches/torch-2.14.1/rerere/abc/preimage: not a diff"
    assert found[1].startswith("fix_tests/test_copy.py:2: 40 lines of test/dynamo/")
    assert len(found) == 2
