"""The torchpatch command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchpatch import __version__, bundle, commands, export, series
from torchpatch.errors import (
    NotASourceTree,
    TorchNotFound,
    TorchPatchError,
    UnsupportedVersion,
)
from torchpatch.state import Target
from torchpatch.targets import InstalledTorch, SourceTree


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    # Unknown options are named before a missing command is.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if "run" not in args:
        parser.error("the following arguments are required: COMMAND")
    try:
        code: int = args.run(args)
        sys.stdout.flush()  # a closed pipe must fail here, not at exit
        return code
    except TorchPatchError as error:
        print(f"torchpatch: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader left (`torchpatch status | head -1`); any change was
        # already made. Keep Python from failing again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        # A file it could not read or write, in a way no refusal foresaw.
        where = f": {error.filename}" if error.filename else ""
        print(f"torchpatch: error: {error.strerror or error}{where}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchpatch",
        description="Apply, verify and revert this project's patch series on torch.",
    )
    parser.add_argument("-V", "--version", action="version", version=_version())
    parser.add_argument(
        "--data",
        type=Path,
        help="directory holding patches/ (default: the bundled one)",
    )
    sub = parser.add_subparsers(metavar="COMMAND")

    status = sub.add_parser("status", help="show what the target carries")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(run=_status)

    apply = sub.add_parser("apply", help="apply the series to the target")
    apply.add_argument("--check", action="store_true", help="change nothing")
    apply.set_defaults(run=_change, change=commands.apply)

    revert = sub.add_parser("revert", help="restore the target's pristine files")
    revert.add_argument("--check", action="store_true", help="change nothing")
    revert.set_defaults(run=_change, change=commands.revert)

    for command in (status, apply, revert):
        where = command.add_mutually_exclusive_group()
        where.add_argument(
            "--site-packages",
            type=Path,
            help="the folder that holds the torch to act on (default: this "
            "interpreter's)",
        )
        where.add_argument(
            "--source-tree",
            type=Path,
            help="act on a PyTorch source checkout, tests included",
        )
        command.add_argument(
            "--torch-version",
            help="with --source-tree: the release it is (default: its version.txt)",
        )

    exporter = sub.add_parser("export", help="write the series as one upstream patch")
    exporter.add_argument("out", help="file to write, or - for standard output")
    exporter.add_argument(
        "--torch-version",
        help="which release's series (default: the installed torch's)",
    )
    exporter.add_argument(
        "--site-packages",
        type=Path,
        help="the folder that holds the installed torch (default: this interpreter's)",
    )
    exporter.set_defaults(run=_export)
    return parser


def _status(args: argparse.Namespace) -> int:
    target = _target(args)
    report = commands.status(target, _series(args, target))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{target.description}")
    print(f"series {report['series']['directory']}: {report['state']}")
    if report["repair"]:
        print(f"  restore the files with: {report['repair']}")
    for patch in report["patches"]:
        print(f"  {patch['status']:<12} {patch['name']}")
    print("files:")
    for file in report["files"]:
        print(f"  {_file_state(file):<19} {file['path']}")
    for stray in report["stray_files"]:
        print(f"  {'stray, killed run':<19} {stray} (apply or revert removes it)")
    for folder in report["leftover_folders"]:
        print(f"left by a killed run: {folder} (apply or revert removes it)")
    return 0


def _file_state(file: dict[str, Any]) -> str:
    if file["matches_record"] is None:
        return "present" if file["exists"] else "absent"
    return "matches RECORD" if file["matches_record"] else "differs from RECORD"


def _change(args: argparse.Namespace) -> int:
    target = _target(args)
    outcome = args.change(target, _series(args, target), check=args.check)
    print(outcome.message)
    for path in outcome.changed:
        print(f"  {path}")
    return 0


def _export(args: argparse.Namespace) -> int:
    root = _data_root(args)
    version = args.torch_version
    if version is None:
        try:
            version = _target(args).version
        except TorchNotFound as error:
            versions = series.supported_versions(root / "patches")
            raise UnsupportedVersion(
                f"{error}: pass --torch-version, one of: {', '.join(versions)}"
            ) from None
    found = series.load_series(root / "patches", version)
    text = export.build(found)
    if args.out == "-":
        sys.stdout.buffer.write(text)
        sys.stdout.flush()
        return 0
    out = Path(args.out)
    try:
        out.write_bytes(text)
    except OSError as error:
        raise TorchPatchError(f"cannot write {out}: {error.strerror}") from None
    count = len(found.patches)
    print(f"wrote {out}: the torch {version} series, {count} patch{'es' * (count > 1)}")
    return 0


def _version() -> str:
    """torchpatch's version and the releases its series serve."""
    try:
        served = series.supported_versions(bundle.data_root() / "patches")
    except TorchPatchError:
        served = []
    releases = f"{served[0]} to {served[-1]}" if served else "none found"
    return f"torchpatch {__version__} (series for torch {releases})"


def _target(args: argparse.Namespace) -> Target:
    if getattr(args, "source_tree", None):
        return SourceTree.open(args.source_tree, args.torch_version)
    if args.torch_version:
        raise TorchPatchError("--torch-version goes with --source-tree")
    if args.site_packages and not args.site_packages.is_dir():
        raise TorchNotFound(f"--site-packages {args.site_packages}: no such folder")
    return InstalledTorch.find(args.site_packages)


def _series(args: argparse.Namespace, target: Target) -> series.Series:
    found = series.load_series(_data_root(args) / "patches", target.version)
    if isinstance(target, SourceTree) and not any(
        (target.root / path).exists() for path in found.files
    ):
        raise NotASourceTree(
            f"{target.root} has none of the {len(found.files)} files that the "
            f"series for torch {target.version} patches: not a PyTorch source tree"
        )
    return found


def _data_root(args: argparse.Namespace) -> Path:
    return args.data.resolve() if args.data else bundle.data_root()
