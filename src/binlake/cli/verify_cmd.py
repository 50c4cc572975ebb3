"""`binlake verify`: every replicated table equals its Iceberg table at the same source position.

Exit 0 only when every table matches; 1 when some differ (or their schemas do); a table that
could not be compared (catch-up timeout, retries exhausted, no Iceberg table but rows in the
source) gives its error's exit code. Errors that stop the whole run (source unreachable, MySQL,
a --tables name the source lacks) are printed as ``error:`` / ``hint:`` by cli/main.py.
Progress goes to stderr, results to stdout; ``--json`` prints one object. pyspark is imported
only when this command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.binlog.names import TableName
from binlake.cli.tables_option import parse_tables_option
from binlake.config import load_config
from binlake.errors import UsageError

if TYPE_CHECKING:
    from binlake.verify.verifier import TableResult, VerifyReport

EXIT_DIFFERENT = 1
JSON_VERSION = 1


def register(commands: Any) -> None:
    verify = commands.add_parser(
        "verify",
        help="compare every replicated table in the source with its Iceberg table at the same "
        "source position (exit 0 only when all match)",
    )
    verify.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    verify.add_argument(
        "--tables",
        metavar="DB.T,...",
        help="only these tables (default: every table [tables] selects)",
    )
    verify.add_argument(
        "--max-differences",
        type=int,
        default=10,
        metavar="N",
        help="list at most N differing keys of each kind per table (default 10)",
    )
    verify.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="wait at most S seconds for the applier to reach the source snapshot (default 300)",
    )
    verify.add_argument(
        "--cut",
        nargs="?",
        const="latest",
        metavar="AT",
        help="compare each table at its snapshot in the consistent cut at or before AT "
        "(default latest; see binlake cut): proves the cut for tables the source has not "
        "changed since it",
    )
    verify.add_argument("--json", action="store_true", help="print one JSON object")
    verify.set_defaults(handler=run_verify)


def parse_tables(text: str | None) -> tuple[TableName, ...] | None:
    return None if text is None else tuple(parse_tables_option(text))


def run_verify(args: argparse.Namespace) -> int:
    from binlake.verify.verifier import VerifyOptions, verify_config

    if args.max_differences < 0 or not args.timeout > 0:
        raise UsageError("--max-differences must be >= 0 and --timeout > 0")
    options = VerifyOptions(
        tables=parse_tables(args.tables),
        max_differences=args.max_differences,
        timeout_s=args.timeout,
        cut=args.cut,
    )
    config = load_config(args.config)
    report = verify_config(config, options, progress=_progress)
    if args.json:
        print(json.dumps(report_json(report), indent=2, ensure_ascii=False))
    else:
        print(render_report(report))
    return verdict(report)


def _progress(message: str) -> None:
    print(f"verify: {message}", file=sys.stderr, flush=True)


def verdict(report: VerifyReport) -> int:
    errors = [r.error for r in report.results if r.error is not None]
    if errors:
        return type(errors[0]).exit_code
    return 0 if report.ok else EXIT_DIFFERENT


# ---- text ---------------------------------------------------------------------------------


def render_report(report: VerifyReport) -> str:
    lines: list[str] = []
    for result in report.results:
        lines += render_result(result)
    ok = sum(1 for r in report.results if r.ok)
    lines.append(
        f"verified {len(report.results)} table(s): {ok} OK, {len(report.results) - ok} not OK"
    )
    return "\n".join(lines)


def render_result(result: TableResult) -> list[str]:
    name = result.table
    if result.status == "ok":
        where = f"; {result.note}" if result.note else _lake_where(result)
        return [f"{name}: OK ({result.source_rows} rows at {result.position}{where})"]
    if result.status == "error":
        assert result.error is not None
        return [f"{name}: ERROR: {result.error}", f"  hint: {result.error.hint}"]
    if result.status == "schema":
        return [f"{name}: SCHEMA DIFFERS from {result.lake_table}"] + [
            f"  {problem}" for problem in result.schema_problems
        ]
    lines = [
        f"{name}: DIFFERENT at {result.position}{_lake_where(result)}: source "
        f"{result.source_rows} rows (checksum {result.source_checksum}), lake "
        f"{result.lake_rows} rows (checksum {result.lake_checksum})"
    ]
    d = result.differences
    kinds = (
        ("missing in lake", d.missing_count, d.missing_in_lake),
        ("extra in lake", d.extra_count, d.extra_in_lake),
        ("different values", d.changed_count, d.changed),
    )
    what = "rows" if result.keyless else "keys"
    for label, count, keys in kinds:
        if count:
            more = f" (first {len(keys)})" if len(keys) < count else ""
            lines.append(f"  {label}: {count} {what}{more}: {', '.join(keys)}")
    return lines


def _lake_where(result: TableResult) -> str:
    if result.lake_position is None or result.lake_position == result.position:
        return ""
    return f"; lake snapshot at {result.lake_position}, nothing after it touches the table"


# ---- JSON ---------------------------------------------------------------------------------


def report_json(report: VerifyReport) -> dict[str, Any]:
    """The stable JSON object of `binlake verify --json` (``version`` 1)."""
    return {
        "version": JSON_VERSION,
        "ok": report.ok,
        "tables": [result_json(r) for r in report.results],
    }


def _keys(keys: list[str], keyless: bool) -> list[Any]:
    return list(keys) if keyless else [json.loads(k) for k in keys]


def result_json(result: TableResult) -> dict[str, Any]:
    d = result.differences
    return {
        "table": str(result.table),
        "source_database": result.table.database,
        "source_table": result.table.table,
        "lake_table": result.lake_table,
        "status": result.status,
        "position": None if result.position is None else str(result.position),
        "lake_position": None if result.lake_position is None else str(result.lake_position),
        "snapshot_id": result.snapshot_id,
        "keyless": result.keyless,
        "attempts": result.attempts,
        "source": {"rows": result.source_rows, "checksum": result.source_checksum},
        "lake": {"rows": result.lake_rows, "checksum": result.lake_checksum},
        "differences": {
            "missing_in_lake": {
                "count": d.missing_count,
                "keys": _keys(d.missing_in_lake, result.keyless),
            },
            "extra_in_lake": {
                "count": d.extra_count,
                "keys": _keys(d.extra_in_lake, result.keyless),
            },
            "different": {"count": d.changed_count, "keys": _keys(d.changed, result.keyless)},
        },
        "schema_problems": list(result.schema_problems),
        "note": result.note,
        "error": None if result.error is None else result.error.fields(),
    }
