"""`binlake check-source`: is the configured source ready for binlake? Exit 0 if so; else each
problem with its exact fix, and exit 1."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from binlake.config import ReplicationMode, load_config
from binlake.source.check import SourceProblem, check_source
from binlake.source.settings import connection_settings

EXIT_PROBLEMS = 1


def register(commands: Any) -> None:
    check = commands.add_parser(
        "check-source",
        help="check the source server's binlog settings and the user's privileges; print the "
        "fix for each problem (exit 0 ready, 1 problems found)",
    )
    check.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    check.set_defaults(handler=run_check_source)


def run_check_source(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    source = config.source
    problems = check_source(
        connection_settings(source), gtid_mode=source.mode is ReplicationMode.GTID
    )
    where = f"{source.user}@{source.host}:{source.port}"
    if not problems:
        print(f"source {where}: ready (binlog ROW/FULL/FULL/CRC32, privileges granted)")
        return 0
    print(f"source {where}: {len(problems)} problem(s)")
    for problem in problems:
        print(render_problem(problem))
    return EXIT_PROBLEMS


def render_problem(problem: SourceProblem) -> str:
    return f"problem: {problem}\n    fix: {problem.fix}"
