"""The ``binlake`` command: argument parsing, dispatch, and the mapping of errors to exit codes.

Every ``BinlakeError`` becomes two lines on stderr (what went wrong, and a hint) and a non-zero
exit code; no traceback reaches the user unless ``BINLAKE_DEBUG=1`` asks for one.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Final

from binlake import __version__, compiled
from binlake.errors import BinlakeError

Handler = Callable[[argparse.Namespace], int]
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
#: The commands that decode events in bulk say once when they run pure Python (binlake.compiled):
#: the long-running ones first (their stderr is a log), the others after a success (an error
#: stays its two lines).
LONG_RUNNING_COMMANDS = ("replicate", "receive")
HOT_COMMANDS = (*LONG_RUNNING_COMMANDS, "binlog")
#: Each command and its module (``register`` adds its parser, its handlers run it). Only the
#: module of the command asked for is imported, as its imports (the source client, Spark, the
#: config...) are most of a short command's time; all of them for ``--help`` or a usage error.
COMMAND_MODULES: Final = {
    "binlog": "binlake.cli.binlog_cmd",
    "check-source": "binlake.cli.check_source_cmd",
    "check-target": "binlake.cli.check_target_cmd",
    "cut": "binlake.cli.cut_cmd",
    "maintain": "binlake.cli.maintain_cmd",
    "receive": "binlake.cli.receive_cmd",
    "replicate": "binlake.cli.replicate_cmd",
    "snapshot": "binlake.cli.snapshot_cmd",
    "status": "binlake.cli.status_cmd",
    "verify": "binlake.cli.verify_cmd",
}


class _Parser(argparse.ArgumentParser):
    """argparse that exits 64 (usage) with a hint instead of 2, which `verify` uses."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        print(f"hint: run `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(64)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``argv``'s command (``None``: every command's)."""
    parser = _Parser(
        prog="binlake",
        description="Exactly-once replication of MySQL/MariaDB binlogs into Apache Iceberg.",
    )
    parser.add_argument(
        "--version", action="version", version=f"binlake {__version__}, {compiled.describe()}"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name in commands_of(argv):
        importlib.import_module(COMMAND_MODULES[name]).register(commands)
    return parser


def commands_of(argv: Sequence[str] | None) -> list[str]:
    """The command ``argv`` runs, when its first word names one; else every command (``binlake
    --help``, ``binlake -h verify``, a misspelt command: the help or the error lists them all)."""
    first = next(iter(argv or ()), None)
    return [first] if first in COMMAND_MODULES else list(COMMAND_MODULES)


def report_error(error: BinlakeError) -> int:
    print(f"error: {error}", file=sys.stderr)
    print(f"hint: {error.hint}", file=sys.stderr)
    return type(error).exit_code


def run(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(words).parse_args(words)
    if args.command in LONG_RUNNING_COMMANDS:
        compiled.say_once_if_pure(sys.stderr)
    code = handle(args)
    if code == 0 and args.command in HOT_COMMANDS:
        compiled.say_once_if_pure(sys.stderr)
    return code


def handle(args: argparse.Namespace) -> int:
    handler: Handler = args.handler
    try:
        return handler(args)
    except BinlakeError as error:
        return report_error(error)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`binlake binlog dump F | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as error:
        if os.environ.get("BINLAKE_DEBUG") == "1":
            traceback.print_exc()
        print(f"error: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        print(
            "hint: this is a bug in binlake; rerun with BINLAKE_DEBUG=1 and report the traceback",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
