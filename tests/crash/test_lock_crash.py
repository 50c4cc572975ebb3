"""The state folder lock across processes: a live holder makes others refuse, naming it; a
holder killed with kill -9 leaves the lock free (the kernel drops its flock)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_driver import DRIVER, run_driver

from binlake.storage.lock import read_holder


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A subprocess holding the lock of ``tmp_path`` until killed."""
    process = subprocess.Popen(
        [sys.executable, str(DRIVER), "lock-hold", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == "locked\n", process.stderr.read() if process.stderr else ""
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_a_second_process_refuses_naming_the_live_holder(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    result = run_driver("lock-try", tmp_path)
    assert result.returncode == 75
    assert f"binlake process {holder.pid} on host" in result.stderr
    assert f"stop process {holder.pid}" in result.stderr
    assert "Traceback" not in result.stderr
    assert holder.poll() is None  # the holder is untouched
    named = read_holder(tmp_path)
    assert named is not None and named.pid == holder.pid
    assert "lock-hold" in named.command


def test_a_holder_killed_with_kill_9_leaves_the_lock_free(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    os.kill(holder.pid, signal.SIGKILL)
    assert holder.wait(timeout=10) == -signal.SIGKILL
    stale = read_holder(tmp_path)
    assert stale is not None and stale.pid == holder.pid  # its details stay, harmlessly

    result = run_driver("lock-try", tmp_path)
    assert result.returncode == 0, result.stderr
    new_pid = int(result.stdout.split()[-1])
    assert new_pid != holder.pid
    # The new holder overwrote the details, then its clean exit emptied the file.
    assert (tmp_path / "lock").read_bytes() == b""


def test_the_lock_file_names_the_holder_while_it_runs(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    content = json.loads((tmp_path / "lock").read_text())
    assert content["pid"] == holder.pid
    assert set(content) == {"pid", "hostname", "started", "command"}
