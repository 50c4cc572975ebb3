"""`binlake binlog recover DIR [--dry-run]`: what it prints, and its exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.cli.main import run
from binlake.errors import LogCorruptionError
from relay_testing import crash_leftover, folder_hashes, source_log, split_events, write_relay


def torn_relay(folder: Path) -> int:
    """A relay file whose tail is one whole event and 20 bytes of the next; returns tail size."""
    events = split_events(source_log(3))
    write_relay(folder, events[:10])
    path = folder / "relay-bin.000001"
    tail = events[10] + events[11][:20]
    crash_leftover(path, tail)
    return len(tail)


def test_recover_prints_the_trim_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tail = torn_relay(tmp_path)
    assert run(["binlog", "recover", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"trimmed {tail} bytes (2 events) from relay-bin.000001 at offset ")
    assert run(["binlog", "recover", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["relay-bin.000001: clean"]


def test_dry_run_prints_what_would_be_done_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tail = torn_relay(tmp_path)
    before = folder_hashes(tmp_path)
    assert run(["binlog", "recover", "--dry-run", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"would trim {tail} bytes (2 events)")
    assert folder_hashes(tmp_path) == before


def test_refusal_prints_error_and_hint_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torn_relay(tmp_path)
    path = tmp_path / "relay-bin.000001"
    data = bytearray(path.read_bytes())
    data[400] ^= 0x20
    path.write_bytes(bytes(data))
    before = folder_hashes(tmp_path)
    code = run(["binlog", "recover", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == LogCorruptionError.exit_code == 65
    assert err.startswith("error: relay-bin.000001, offset ")
    assert "hint: " in err and "Traceback" not in err
    assert folder_hashes(tmp_path) == before


def test_folder_without_index_exits_with_storage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["binlog", "recover", str(tmp_path)]) == 74
    assert "has no .index file" in capsys.readouterr().err


def test_missing_folder_exits_with_storage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["binlog", "recover", str(tmp_path / "nope")]) == 74
    assert "is not a folder" in capsys.readouterr().err
