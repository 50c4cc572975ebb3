"""The ``binlake`` command: argument parsing, dispatch, and the mapping of errors to exit codes.

Every ``BinlakeError`` becomes two lines on stderr (what went wrong, and a hint) and a non-zero
exit code; no traceback reaches the user unless ``BINLAKE_DEBUG=1`` asks for one.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from binlake import __version__, compiled
from binlake.cli import (
    binlog_cmd,
    check_source_cmd,
    check_target_cmd,
    cut_cmd,
    maintain_cmd,
    receive_cmd,
    replicate_cmd,
    snapshot_cmd,
    status_cmd,
    verify_cmd,
)
from binlake.errors import BinlakeError

Handler = Callable[[argparse.Namespace], int]
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
#: The commands that decode events in bulk say once when they run pure Python (binlake.compiled):
#: the long-running ones first (their stderr is a log), the others after a success (an error
#: stays its two lines).
LONG_RUNNING_COMMANDS = ("replicate", "receive")
HOT_COMMANDS = (*LONG_RUNNING_COMMANDS, "binlog")


class _Parser(argparse.ArgumentParser):
    """argparse that exits 64 (usage) with a hint instead of 2, which `verify` uses."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        print(f"hint: run `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(64)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="binlake",
        description="Exactly-once replication of MySQL/MariaDB binlogs into Apache Iceberg.",
    )
    parser.add_argument(
        "--version", action="version", version=f"binlake {__version__}, {compiled.describe()}"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    binlog_cmd.register(commands)
    check_source_cmd.register(commands)
    check_target_cmd.register(commands)
    cut_cmd.register(commands)
    maintain_cmd.register(commands)
    receive_cmd.register(commands)
    replicate_cmd.register(commands)
    snapshot_cmd.register(commands)
    status_cmd.register(commands)
    verify_cmd.register(commands)
    return parser


def report_error(error: BinlakeError) -> int:
    print(f"error: {error}", file=sys.stderr)
    print(f"hint: {error.hint}", file=sys.stderr)
    return type(error).exit_code


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
