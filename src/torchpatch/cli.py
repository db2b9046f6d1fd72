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
from torchpatch.errors import TorchPatchError, UnsupportedVersion
from torchpatch.state import Target
from torchpatch.targets import InstalledTorch, SourceTree


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
    parser.add_argument("--version", action="version", version=__version__)
    parser.add_argument(
        "--data",
        type=Path,
        help="directory holding patches/ and fix_tests/ (default: the bundled ones)",
    )
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

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
            help="patch the torch installed there (default: this interpreter's)",
        )
        where.add_argument(
            "--source-tree",
            type=Path,
            help="patch a PyTorch source checkout, tests included",
        )
        command.add_argument(
            "--torch-version",
            help="with --source-tree: the release it is (default: its version.txt)",
        )

    exporter = sub.add_parser(
        "export", help="write one upstream patch: the series plus the new tests"
    )
    exporter.add_argument("out", help="file to write, or - for standard output")
    exporter.add_argument(
        "--torch-version", help="which series (default: the only one there is)"
    )
    exporter.set_defaults(run=_export)
    return parser


def _status(args: argparse.Namespace) -> int:
    target = _target(args)
    report = commands.status(target, _series(args, target.version))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{target.description}")
    print(f"series {report['series']['directory']}: {report['state']}")
    for patch in report["patches"]:
        print(f"  {patch['status']:<12} {patch['name']}")
    print("files:")
    for file in report["files"]:
        print(f"  {_file_state(file):<19} {file['path']}")
    for stray in report["stray_files"]:
        print(f"  {'stray, killed run':<19} {stray} (apply or revert removes it)")
    return 0


def _file_state(file: dict[str, Any]) -> str:
    if file["matches_record"] is None:
        return "present" if file["exists"] else "absent"
    return "matches RECORD" if file["matches_record"] else "differs from RECORD"


def _change(args: argparse.Namespace) -> int:
    target = _target(args)
    outcome = args.change(target, _series(args, target.version), check=args.check)
    print(outcome.message)
    for path in outcome.changed:
        print(f"  {path}")
    return 0


def _export(args: argparse.Namespace) -> int:
    root = _data_root(args)
    version = args.torch_version
    if version is None:
        versions = series.supported_versions(root / "patches")
        if len(versions) != 1:
            raise UnsupportedVersion(
                f"pass --torch-version, one of: {', '.join(versions) or 'none'}"
            )
        version = versions[0]
    found = series.load_series(root / "patches", version)
    text = export.build(found, root)
    if args.out == "-":
        sys.stdout.buffer.write(text)
        sys.stdout.flush()
        return 0
    out = Path(args.out)
    try:
        out.write_bytes(text)
    except OSError as error:
        raise TorchPatchError(f"cannot write {out}: {error.strerror}") from None
    tests = ", ".join(str(t.upstream) for t in found.exported_tests) or "no test files"
    print(f"wrote {out}: torch {version} series plus {tests}")
    return 0


def _target(args: argparse.Namespace) -> Target:
    if args.source_tree:
        return SourceTree.open(args.source_tree, args.torch_version)
    if args.torch_version:
        raise TorchPatchError("--torch-version goes with --source-tree")
    return InstalledTorch.find(args.site_packages)


def _series(args: argparse.Namespace, version: str) -> series.Series:
    return series.load_series(_data_root(args) / "patches", version)


def _data_root(args: argparse.Namespace) -> Path:
    return args.data.resolve() if args.data else bundle.data_root()
