"""`binlake binlog dump`'s output is pinned byte for byte: the binlog of every column type
(tests/fixtures/binlog/types.binlog) dumped in each of the four forms is compared with the
output recorded before the command's rendering was made fast (issue #37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.cli.main import run
from binlog_fixtures import FIXTURES, TYPES_BINLOG

FORMS = {
    "types.dump.txt": [],
    "types.dump-rows.txt": ["--rows"],
    "types.dump.jsonl": ["--json"],
    "types.dump-rows.jsonl": ["--json", "--rows"],
}


@pytest.mark.parametrize("recorded", sorted(FORMS))
def test_dump_of_every_column_type_is_byte_identical_to_the_recorded_output(
    recorded: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert run(["binlog", "dump", *FORMS[recorded], str(TYPES_BINLOG)]) == 0
    assert capsysbinary.readouterr().out == (FIXTURES / recorded).read_bytes()


def test_dump_from_a_start_position_is_the_tail_of_the_whole_dump(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    whole = (FIXTURES / "types.dump-rows.jsonl").read_bytes().splitlines(keepends=True)
    start = 2392  # the GTID event of the second transaction of the `ints` table
    skipped = next(
        i for i, line in enumerate(whole) if line.startswith(b'{"type": "Gtid", "offset": 2392,')
    )
    assert (
        run(
            [
                "binlog",
                "dump",
                "--json",
                "--rows",
                "--start-position",
                str(start),
                str(TYPES_BINLOG),
            ]
        )
        == 0
    )
    assert capsysbinary.readouterr().out == b"".join(whole[skipped:])


def test_dump_of_two_files_is_their_dumps_one_after_the_other(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    second = tmp_path / "copy.binlog"
    second.write_bytes(TYPES_BINLOG.read_bytes())
    assert run(["binlog", "dump", "--rows", str(TYPES_BINLOG), str(second)]) == 0
    assert capsysbinary.readouterr().out == (FIXTURES / "types.dump-rows.txt").read_bytes() * 2


ORPHAN_ROWS_EVENT = {  # the first Write_rows_v1 at 1138, its TABLE_MAP at 1026
    "--json": b'{"type": "Write_rows_v1", "offset": 1138, "size": 76, "end_log_pos": 1214, '
    b'"server_id": 1, "timestamp": 1795287658, "info": "table id 18 (?)", "rows": []}',
    "--text": b"      1138 Write_rows_v1      size=76      end_log_pos=1214       table id 18 (?)",
}


@pytest.mark.parametrize("form", sorted(ORPHAN_ROWS_EVENT))
def test_a_rows_event_whose_table_map_lies_before_the_start_has_no_rows(
    form: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    options = ["--rows", "--start-position", "1138"] + (["--json"] if form == "--json" else [])
    assert run(["binlog", "dump", *options, str(TYPES_BINLOG)]) == 0
    assert capsysbinary.readouterr().out.splitlines()[0] == ORPHAN_ROWS_EVENT[form]


def test_a_damaged_event_ends_the_dump_with_a_typed_error_after_every_event_before_it(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    damaged = 2434  # an ANNOTATE_ROWS event: a byte of its text flipped, its CRC32 fails
    data = bytearray(TYPES_BINLOG.read_bytes())
    data[damaged + 30] ^= 0x01
    path = tmp_path / "damaged.000001"
    path.write_bytes(bytes(data))
    assert run(["binlog", "dump", "--rows", str(path)]) != 0
    out, err = capsysbinary.readouterr()
    whole = (FIXTURES / "types.dump-rows.txt").read_bytes().splitlines(keepends=True)
    before = next(i for i, line in enumerate(whole) if line.startswith(b"      2434 "))
    assert out == b"".join(whole[:before])  # written, though the dump's writes are batched
    assert err.startswith(b"error: ") and b"\nhint: " in err and b"Traceback" not in err
