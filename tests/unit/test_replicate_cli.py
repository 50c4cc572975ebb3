"""`binlake replicate` refuses bad input with a typed error, a hint and its exit code, no
traceback, and before it starts Spark: a missing or invalid config, a source that cannot be
reached, a state folder another process holds."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from binlake.cli.main import run
from binlake.storage.lock import StateLock
from binlake_dev.sandbox import free_port

CONFIG = """
[source]
host = "127.0.0.1"
port = {port}
user = "repl"
server_id = 9
connect_timeout_s = 2
[state]
dir = "{state}"
"""


def config(tmp_path: Path, extra: str = "", port: int | None = None) -> Path:
    path = tmp_path / "binlake.toml"
    text = CONFIG.format(port=port or free_port(), state=tmp_path / "state")
    path.write_text(text + extra)
    return path


def replicate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = run(["replicate", *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_a_missing_config_file_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = replicate(capsys, "--config", str(tmp_path / "nope.toml"))
    assert code == 78
    assert "error: config file" in err and "hint:" in err


def test_an_invalid_applier_setting_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, "[applier]\nmax_transactions = -5\n")
    code, err = replicate(capsys, "--config", str(path))
    assert code == 78
    assert "max_transactions" in err and "hint:" in err


def test_a_source_that_refuses_connections_fails_fast_without_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code, err = replicate(capsys, "--config", str(config(tmp_path)), "--until-caught-up")
    assert code == 69, err
    assert "error:" in err and "hint:" in err
    assert time.monotonic() - started < 15  # Spark alone takes longer to start
    assert not (tmp_path / "warehouse").exists()


def test_a_state_folder_held_by_another_process_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path)
    (tmp_path / "state").mkdir()
    with StateLock.acquire(tmp_path / "state"):
        code, err = replicate(capsys, "--config", str(path))
    assert code == 75
    assert "lock" in err and "hint:" in err


def test_an_unknown_argument_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        run(["replicate", "--config", str(config(tmp_path)), "--until-done"])
    assert caught.value.code == 64


def test_a_metrics_port_in_use_is_a_config_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = config(tmp_path, f"[applier]\nmetrics_port = {port}\n")
        code, err = replicate(capsys, "--config", str(path))
    assert code == 78
    assert f"cannot serve metrics on port {port}" in err and "hint:" in err
