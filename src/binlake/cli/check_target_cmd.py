"""`binlake check-target`: can binlake write its lake as configured? Each check (master,
session and executors, catalog, namespaces, warehouse space: binlake.lake.spark.target_check) is
printed with what it found, or as a problem with its fix. Exit 0 if the target is ready, 1 if
not. pyspark is imported only when the command runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.config import load_config
from binlake.lake.catalog.target import lake_target

if TYPE_CHECKING:
    from binlake.lake.spark.target_check import TargetCheck

EXIT_PROBLEMS = 1


def register(commands: Any) -> None:
    check = commands.add_parser(
        "check-target",
        help="check the Spark master, the catalog, the namespaces binlake writes and the "
        "warehouse's free space; print the fix for each problem (exit 0 ready, 1 problems)",
    )
    check.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    check.set_defaults(handler=run_check_target)


def run_check_target(args: argparse.Namespace) -> int:
    from binlake.lake.spark.target_check import check_target

    target = lake_target(load_config(args.config))
    print(f"target {target.master}, catalog {target.catalog} at {target.location}")
    report = check_target(target)
    for check in report.checks:
        print(render_check(check))
    if report.ok:
        print("target: ready")
        return 0
    print(f"target: {len(report.problems)} problem(s)")
    return EXIT_PROBLEMS


def render_check(check: TargetCheck) -> str:
    took = f" ({check.seconds:.1f} s)"
    if check.error is None:
        return f"ok: {check.name}: {check.detail}{took}"
    name = type(check.error).__name__
    return f"problem: {check.name}: {name}: {check.error}{took}\n    fix: {check.error.hint}"
