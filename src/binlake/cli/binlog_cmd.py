"""`binlake binlog ...`: commands that read binlog files (ours or a server's) offline."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.rows import RowChange, RowsEvent, decode_rows
from binlake.binlog.stream import ProblemKind
from binlake.binlog.tablemap import TableMap
from binlake.cli.render import DumpRenderer
from binlake.errors import FileAccessError
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import files_of

if TYPE_CHECKING:
    from binlake.storage.tail_scan import FileFacts

EXIT_TORN_TAIL = 1
EXIT_CORRUPTION = 2


def register(commands: Any) -> None:
    group = commands.add_parser("binlog", help="read, check and repair binlog files offline")
    sub = group.add_subparsers(dest="binlog_command", metavar="SUBCOMMAND")
    sub.required = True

    dump = sub.add_parser("dump", help="print the events of binlog files, one per line")
    dump.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="binlog files, or a folder holding an .index file",
    )
    dump.add_argument("--json", action="store_true", help="JSON Lines: one object per event")
    dump.add_argument("--rows", action="store_true", help="include decoded row values")
    dump.add_argument(
        "--start-position",
        type=int,
        default=None,
        metavar="N",
        help="start at byte offset N of the first file (an event boundary)",
    )
    dump.set_defaults(handler=run_dump)

    verify = sub.add_parser(
        "verify",
        help="check binlog files: exit 0 clean, 1 torn tail of the newest file only, "
        "2 corruption (or a torn tail in an older file, or an unreadable file)",
    )
    verify.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="binlog files, or a folder holding an .index file",
    )
    verify.add_argument("--json", action="store_true", help="one JSON object per file")
    verify.set_defaults(handler=run_verify)

    recover = sub.add_parser(
        "recover",
        help="repair a binlog or relay log folder after a crash: repair the index, trim the "
        "newest file to its last complete transaction, clear IN_USE (refuses on corruption)",
    )
    recover.add_argument(
        "folder",
        type=Path,
        metavar="DIR",
        help="the folder holding the log files and their .index file",
    )
    recover.add_argument(
        "--dry-run", action="store_true", help="print what would be done and change nothing"
    )
    recover.set_defaults(handler=run_recover)


@contextmanager
def open_binlog(path: Path) -> Iterator[BinlogFileReader]:
    try:
        fileobj = path.open("rb")
    except OSError as exc:
        raise FileAccessError(f"cannot open: {exc.strerror}", file=str(path)) from exc
    with fileobj, BinlogFileReader(fileobj, str(path)) as reader:
        yield reader


def _changes_of(event: BinlogEvent, table: TableMap | None) -> list[RowChange]:
    if table is None or not isinstance(event.payload, RowsEvent):
        return []
    return decode_rows(event.payload, table)


def _table_for(event: BinlogEvent, tables: dict[int, TableMap]) -> TableMap | None:
    payload = event.payload
    if isinstance(payload, TableMap):
        tables[payload.table_id] = payload
        return payload
    if isinstance(payload, RowsEvent):
        return tables.get(payload.table_id)
    return None


def run_dump(args: argparse.Namespace) -> int:
    files = [f for p in args.files for f in files_of(p)]
    renderer = DumpRenderer(as_json=args.json)
    out = BatchedWriter(sys.stdout)
    try:
        for i, path in enumerate(files):
            with open_binlog(path) as reader:
                tables: dict[int, TableMap] = {}
                start = args.start_position if i == 0 else None
                for event in reader.events(start=start):
                    table = _table_for(event, tables)
                    changes = _changes_of(event, table) if args.rows else None
                    out.add(renderer.render(event, table, changes))
    finally:  # what came before an error is printed, as the error is
        out.flush()
    return 0


class BatchedWriter:
    """Text for a stream, written in one call every ``batch`` pieces (and at ``flush``)."""

    def __init__(self, stream: TextIO, batch: int = 512) -> None:
        self.stream = stream
        self.batch = batch
        self.pending: list[str] = []

    def add(self, text: str) -> None:
        self.pending.append(text)
        if len(self.pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        text = "".join(self.pending)
        self.pending.clear()
        self.stream.write(text)


def _scan_text(facts: FileFacts, path: Path) -> str:
    state = "IN_USE set" if facts.in_use else "IN_USE clear"
    head = (
        f"{path}: {facts.events} events, {facts.transactions} transactions, "
        f"last valid offset {facts.last_good_offset} of {facts.size}, {state}"
    )
    return f"{head}, OK" if facts.clean else f"{head}, {facts.describe_problem()}"


def _scan_json(facts: FileFacts, path: Path) -> dict[str, Any]:
    problem = None
    if not facts.clean:
        kind = ProblemKind.TORN_TAIL if facts.torn or facts.tail_damage else ProblemKind.CORRUPTION
        problem = {
            "kind": kind.value,
            "offset": facts.problem_offset,
            "message": facts.describe_problem(),
        }
    gtids = [gtid for gtid, _start, _end in facts.gtids]
    return {
        "file": str(path),
        "size": facts.size,
        "events": facts.events,
        "transactions": facts.transactions,
        "last_good_offset": facts.last_good_offset,
        "transaction_boundary": facts.boundary,
        "in_use": facts.in_use,
        "first_gtid": gtids[0] if gtids else None,
        "last_gtid": gtids[-1] if gtids else None,
        "problem": problem,
    }


def _exit_code(facts: FileFacts, newest: bool) -> int:
    """What recovery would trim (a torn tail of the newest file) is 1; anything else bad is 2."""
    if facts.clean:
        return 0
    if newest and (facts.torn or facts.tail_damage):
        return EXIT_TORN_TAIL
    return EXIT_CORRUPTION


def _hint(facts: FileFacts, code: int) -> str:
    if code == EXIT_TORN_TAIL:
        return (
            "a crash left an incomplete tail; `binlake binlog recover DIR` trims the file "
            "to its last complete transaction"
        )
    return (
        f"nothing past offset {facts.problem_offset} can be trusted: valid data follows the "
        "damage, or the file is not the newest; restore it from a copy or re-fetch it"
    )


def run_verify(args: argparse.Namespace) -> int:
    from binlake.storage.tail_scan import scan_file  # not imported for `dump`

    files = [f for p in args.paths for f in files_of(p)]
    worst = 0
    for i, path in enumerate(files):
        try:
            facts = scan_file(path)
        except FileAccessError as error:
            worst = EXIT_CORRUPTION
            print(json.dumps(error.fields()) if args.json else f"{path}: error: {error}")
            print(f"hint: {error.hint}", file=sys.stderr)
            continue
        code = _exit_code(facts, newest=i == len(files) - 1)
        worst = max(worst, code)
        print(json.dumps(_scan_json(facts, path)) if args.json else _scan_text(facts, path))
        if code:
            print(f"hint: {_hint(facts, code)}", file=sys.stderr)
    return worst


def run_recover(args: argparse.Namespace) -> int:
    """Exit 0 when the folder is (or, with --dry-run, would be) clean; typed errors otherwise."""
    from binlake.storage.recovery import recover_log  # not imported for `dump`

    report = recover_log(args.folder, dry_run=args.dry_run)
    for line in report.lines:
        print(line)
    return 0
