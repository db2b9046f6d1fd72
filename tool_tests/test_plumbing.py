"""tools/plumbing.py: the two states of a torch as trees, whatever state the
install is in; pytest's outcomes; DEP-3 fields; generated parts of a page."""

from __future__ import annotations

import pytest
from fakes import BUILTIN, PATCHED, PRISTINE, SIDE_EFFECTS, UNTOUCHED

from tools import plumbing
from torchpatch import series
from torchpatch.cli import main
from torchpatch.targets import InstalledTorch


@pytest.fixture
def installed(data, install, monkeypatch):
    found = series.load_series(data / "patches", "2.4.1")
    target = InstalledTorch.find(install.site_packages)
    monkeypatch.setattr(plumbing, "installed_series", lambda: (target, found))
    return install


@pytest.mark.parametrize("applied", [False, True])
def test_trees_of_both_states_from_either(installed, data, tmp_path, applied):
    if applied:
        main(
            [
                "--data",
                str(data),
                "apply",
                "--site-packages",
                str(installed.site_packages),
            ]
        )
    before = installed.snapshot()
    for state, expected in (("pristine", PRISTINE), ("patched", PATCHED)):
        tree = tmp_path / state
        touched = plumbing.write_tree(tree, state, ["torch/_dynamo/*.py"])
        assert sorted(touched) == [SIDE_EFFECTS, BUILTIN]
        for path in (SIDE_EFFECTS, BUILTIN, UNTOUCHED):
            assert (tree / path).read_bytes() == expected[path], (state, path)
    assert installed.snapshot() == before  # read, never switched


def test_junit_outcomes_and_counts(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert False\n"
        "@pytest.mark.skip\ndef test_skipped(): pass\n"
        "@pytest.mark.xfail\ndef test_xfailed(): assert False\n"
    )
    found = plumbing.junit(["-c", "/dev/null", "test_x.py"], cwd=tmp_path)
    assert found == {
        "test_x::test_ok": "passed",
        "test_x::test_bad": "failure",
        "test_x::test_skipped": "skipped",
        "test_x::test_xfailed": "xfailed",
    }
    assert plumbing.counts(found) == {
        "tests": 4, "failures": 1, "errors": 0, "skipped": 1, "xfailed": 1,
        "passed": 1,
    }  # fmt: skip


def test_dep3_fields_and_markers():
    fields = plumbing.dep3("# a comment\nOrigin: vendor\nNot-Carried: one\n two\n")
    assert fields == {"Origin": "vendor", "Not-Carried": "one\n two"}
    page = "head\n<!-- a -->\nold\n<!-- b -->\ntail\n"
    assert plumbing.between_markers(page, "<!-- a -->", "<!-- b -->", "new") == (
        "head\n<!-- a -->\nnew\n<!-- b -->\ntail\n"
    )
    with pytest.raises(SystemExit, match="no '<!-- c -->'"):
        plumbing.between_markers(page, "<!-- c -->", "<!-- b -->", "new")
