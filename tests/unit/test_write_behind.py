"""WriteBehind: the relay log writer's writes on a thread of their own, in order, errors kept."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from binlake.relay import write_behind
from binlake.relay.write_behind import WriteBehind, write_all


def test_submitted_buffers_are_written_in_order_once_drained(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    behind = WriteBehind()
    try:
        expected = b""
        for n in range(50):
            buffers = [bytes([n]) * (n + 1), b"|"]
            behind.submit(fd, buffers, n + 2)
            expected += b"".join(buffers)
        behind.drain()
        assert path.read_bytes() == expected
    finally:
        os.close(fd)


def test_more_than_iov_max_buffers_are_all_written(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        buffers = [i.to_bytes(2, "little") for i in range(write_behind.IOV_MAX * 2 + 7)]
        write_all(fd, buffers)
        assert path.read_bytes() == b"".join(buffers)
    finally:
        os.close(fd)


def test_a_failed_write_is_raised_by_the_next_drain_and_every_submit_after_it(
    tmp_path: Path,
) -> None:
    fd = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)  # writes fail with EBADF
    behind = WriteBehind()
    try:
        behind.submit(fd, [b"x" * 10], 10)
        with pytest.raises(OSError):
            behind.drain()
        with pytest.raises(OSError):
            behind.submit(fd, [b"y"], 1)
        with pytest.raises(OSError):
            behind.drain()
    finally:
        os.close(fd)


def test_submit_waits_while_the_queue_is_full_and_goes_on_once_it_is_written() -> None:
    read_end, write_end = os.pipe()  # a pipe holds 64 KiB: a bigger write waits for its reader
    behind = WriteBehind(max_queued_bytes=1)
    chunk = b"z" * (256 * 1024)
    try:
        behind.submit(write_end, [chunk], len(chunk))  # the thread blocks in the write
        second = threading.Thread(target=behind.submit, args=(write_end, [b"end"], 3))
        second.start()
        second.join(0.3)
        assert second.is_alive(), "submit did not wait for the full queue"
        received = b""
        while len(received) < len(chunk) + 3:
            received += os.read(read_end, 1 << 20)
        second.join(5)
        assert not second.is_alive()
        behind.drain()
        assert received == chunk + b"end"
    finally:
        os.close(read_end)
        os.close(write_end)


def test_an_idle_thread_ends_and_the_next_submit_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_behind, "IDLE_S", 0.05)
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    behind = WriteBehind()
    try:
        behind.submit(fd, [b"a"], 1)
        behind.drain()
        deadline = time.monotonic() + 5
        while not _no_writer_thread() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _no_writer_thread()
        behind.submit(fd, [b"b"], 1)
        behind.drain()
        assert path.read_bytes() == b"ab"
    finally:
        os.close(fd)


def _no_writer_thread() -> bool:
    return not any(t.name == "binlake-relay-write" for t in threading.enumerate())


def test_an_unexpected_error_in_the_thread_is_raised_to_the_caller_not_waited_on(
    tmp_path: Path,
) -> None:
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    behind = WriteBehind()
    try:
        behind.submit(fd, [b"ok", 42], 2)  # type: ignore[list-item]  # not a buffer: a bug
        with pytest.raises(TypeError):
            behind.drain()
    finally:
        os.close(fd)
