"""The ``jobsched`` console script.

Each command group lives in ``jobsched/cli/commands/<name>.py`` and exposes ``register(subparsers)``;
add its name to :data:`COMMAND_MODULES` to load it. A :class:`ValidationError` from any command is
printed on stderr as ``error: <code>: <message>`` (the client commands' format) with exit status 2
(argparse's own usage errors also exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from jobsched import __version__
from jobsched.core.errors import ValidationError

COMMAND_MODULES = [
    "preview",
    "jobs",
    "runs",
    "workflows",
    "apply",
    "dlq",
    "settings",
    "limits",
    "usage",
    "budget",
    "forecast",
    "stats",
    "handlers",
    "admin",
    "health",
    "dev",
    "worker",
    "deploy_check",
    "bench",
]


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every command group of COMMAND_MODULES registered."""
    parser = argparse.ArgumentParser(prog="jobsched", description="jobsched: a serverless job scheduler")
    parser.add_argument("--version", action="version", version=f"jobsched {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"jobsched.cli.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit status (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except ValidationError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2


def entry() -> None:
    """Console-script wrapper: exit the process with main()'s status."""
    raise SystemExit(main())


if __name__ == "__main__":
    entry()
