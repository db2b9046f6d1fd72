"""An apply or revert killed between two writes is completed by the next one."""

from __future__ import annotations

import json

import pytest
from fakes import BUILTIN, PATCHED, PRISTINE, SIDE_EFFECTS
from killed import torchpatch_killed_after_first_write

TORCH_FILES = [SIDE_EFFECTS, BUILTIN]


def kill(data, install, command):
    torchpatch_killed_after_first_write(
        "--data", str(data), command, "--site-packages", str(install.site_packages)
    )


def status(run):
    _, out, _ = run("status", "--json")
    return json.loads(out)


@pytest.mark.parametrize("killed", ["apply", "revert"])
@pytest.mark.parametrize("then", ["apply", "revert"])
def test_killed_command_is_completed(run, data, install, killed, then):
    if killed == "revert":
        run("apply")
    kill(data, install, killed)
    # Files are written in sorted order: side_effects.py went, builtin.py
    # did not.
    first = PATCHED if killed == "apply" else PRISTINE
    second = PRISTINE if killed == "apply" else PATCHED
    assert install.read(SIDE_EFFECTS) == first[SIDE_EFFECTS]
    assert install.read(BUILTIN) == second[BUILTIN]

    report = status(run)
    assert report["state"] == "partially applied"
    # The first patch touches both files, the second only side_effects.py.
    assert [p["status"] for p in report["patches"]] == [
        "partly applied",
        "applied" if killed == "apply" else "not applied",
    ]

    code, out, err = run(then)
    assert code == 0, err
    expected = PATCHED if then == "apply" else PRISTINE
    for path in TORCH_FILES:
        assert install.read(path) == expected[path], path
    assert status(run)["state"] == ("applied" if then == "apply" else "pristine")


def test_partial_state_with_a_local_edit_is_still_refused(run, data, install):
    kill(data, install, "apply")
    path = install.site_packages / BUILTIN
    path.write_bytes(path.read_bytes() + b"# local edit\n")
    code, _, err = run("apply")
    assert code == 1
    assert f": {BUILTIN}; restore them with: " in err
    assert err.count("\n") == 1
    assert SIDE_EFFECTS not in err
    assert status(run)["state"] == "modified"
