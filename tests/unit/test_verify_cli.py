"""`binlake binlog verify`: its verdict agrees with what `recover` would do."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.cli.main import run
from binlog_builder import LogBuilder


def write_log(folder: Path, damage_in_transaction: int | None) -> Path:
    """A 4-transaction log; optionally one byte flipped in a statement of transaction N."""
    log = LogBuilder().header()
    spans = [log.transaction(statements=3) for _ in range(4)]
    data = bytearray(log.bytes())
    if damage_in_transaction is not None:
        start, _end = spans[damage_in_transaction]
        statement = log.offsets[log.offsets.index(start) + 1]
        data[statement + 30] ^= 0x01
    path = folder / "mariadb-bin.000001"
    path.write_bytes(bytes(data))
    (folder / "mariadb-bin.index").write_text("./mariadb-bin.000001\n")
    return path


def test_clean_log_verifies_with_exit_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_log(tmp_path, None)
    size = path.stat().st_size
    assert run(["binlog", "verify", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"{path}: 22 events, 4 transactions, last valid offset {size} of {size}, IN_USE clear, OK\n"
    )


def test_damage_inside_the_last_transaction_is_a_torn_tail_that_recover_trims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_log(tmp_path, damage_in_transaction=3)
    assert run(["binlog", "verify", str(tmp_path)]) == 1
    assert "inside the last transaction" in capsys.readouterr().out
    assert run(["binlog", "recover", str(tmp_path)]) == 0
    capsys.readouterr()
    assert run(["binlog", "verify", str(tmp_path)]) == 0
    assert "3 transactions" in capsys.readouterr().out


def test_damage_before_the_last_transaction_is_corruption_that_recover_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_log(tmp_path, damage_in_transaction=1)
    before = path.read_bytes()
    assert run(["binlog", "verify", str(tmp_path)]) == 2
    assert "corruption at offset" in capsys.readouterr().out
    assert run(["binlog", "recover", str(tmp_path)]) != 0
    assert path.read_bytes() == before
