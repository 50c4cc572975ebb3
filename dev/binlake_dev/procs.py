"""Process helpers of the Spark cluster and PostgreSQL sandboxes: children in their own process
group with their output in a log file, stopped by PID, waits with a deadline that fail at once
when the child dies, and process-tree lookups through /proc.

A child still running when the interpreter exits is killed (its whole process group), so a
forgotten ``stop()`` leaves no JVM or postmaster behind.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_children: set[subprocess.Popen[bytes]] = set()


class ChildStartError(RuntimeError):
    """A sandbox's process did not start (it exited, or was not ready in time)."""


def spawn(
    argv: list[str],
    *,
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (a Ctrl-C in the terminal does not reach it) with
    stdout and stderr appended to ``log``; ``user``: run as that OS user (we are root)."""
    with log.open("ab") as out:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            user=user,
            start_new_session=True,
        )
    _children.add(child)
    return child


def stop_child(
    child: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout_s: float = 30.0
) -> int:
    """Send ``sig`` to ``child`` (by its PID), wait, SIGKILL it if it lingers; its exit code."""
    if child.poll() is None:
        child.send_signal(sig)
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    _children.discard(child)
    return int(child.returncode)


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    alive: Callable[[], bool] = lambda: True,
    interval_s: float = 0.05,
    log: Path | None = None,
) -> T:
    """Call ``probe`` until it returns something other than None. ``ChildStartError`` as soon
    as ``alive()`` is False, or after ``timeout_s`` (with the tail of ``log``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found is not None:
            return found
        if not alive():
            raise ChildStartError(f"{what}: the process exited before it was ready{_tail(log)}")
        if time.monotonic() > deadline:
            raise ChildStartError(f"{what}: not ready after {timeout_s:.0f} s{_tail(log)}")
        time.sleep(interval_s)


def _tail(log: Path | None, lines: int = 30) -> str:
    if log is None or not log.exists():
        return ""
    text = log.read_text("utf-8", errors="replace").splitlines()[-lines:]
    return f"\n--- tail of {log} ---\n" + "\n".join(text)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc/PID/task/*/children)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            try:
                found = [int(p) for p in task.read_text().split()]
            except OSError:
                continue
            out += found
            todo += found
    return out


def cmdline(pid: int) -> list[str]:
    """The command line of ``pid`` ([] when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


@atexit.register
def _kill_leftovers() -> None:
    for child in list(_children):
        if child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                child.kill()
            child.wait()
    _children.clear()
