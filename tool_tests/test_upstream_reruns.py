"""tools/upstream_test.py tells a flaky test from a regression by rerunning."""

from __future__ import annotations

import sys
from pathlib import Path

from tools import upstream_test

# Stands in for the patched venv's python: "-m pytest ... --junitxml=R" writes
# a report in which test_flaky passes from its second run on, test_broken
# never passes and test_fine always does.
FAKE_PYTHON = """#!{python}
import sys
from pathlib import Path

count = Path(__file__).with_name("runs")
runs = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(runs))
report = next(a for a in sys.argv if a.startswith("--junitxml="))
failure = "<failure message='x'/>"
cases = {{"test_fine": "", "test_broken": failure,
          "test_flaky": failure if runs == 1 else ""}}
Path(report.partition("=")[2]).write_text(
    "<testsuites><testsuite>"
    + "".join(f"<testcase classname='test.dynamo.test_x.T' name='{{name}}'>"
              f"{{body}}</testcase>" for name, body in cases.items())
    + "</testsuite></testsuites>"
)
"""


def fake_python(tmp_path: Path) -> Path:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(FAKE_PYTHON.format(python=sys.executable))
    python.chmod(0o755)
    (tmp_path / "tree" / "test").mkdir(parents=True)
    return python


def test_a_test_that_passes_in_a_rerun_is_flaky_not_a_regression(tmp_path):
    python = fake_python(tmp_path)
    lost = ["dynamo.test_x.T::test_broken", "dynamo.test_x.T::test_flaky"]
    regressed, flaky = upstream_test.rerun_lost(
        lost, tmp_path / "tree", python, "test_x.py", "1", tmp_path / "patched.xml"
    )
    assert regressed == ["dynamo.test_x.T::test_broken"]
    assert flaky == ["dynamo.test_x.T::test_flaky"]
    # test_broken failed the first rerun too, so the file ran again.
    assert (python.parent / "runs").read_text() == str(upstream_test.RERUNS)


def test_no_rerun_once_every_lost_test_passed_again(tmp_path):
    python = fake_python(tmp_path)
    regressed, flaky = upstream_test.rerun_lost(
        ["dynamo.test_x.T::test_fine"], tmp_path / "tree", python, "test_x.py", "1",
        tmp_path / "patched.xml",
    )  # fmt: skip
    assert (regressed, flaky) == ([], ["dynamo.test_x.T::test_fine"])
    assert (python.parent / "runs").read_text() == "1"
