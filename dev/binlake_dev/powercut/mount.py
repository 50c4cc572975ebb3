"""``PowerCutMount``: the power-cut file system as a test uses it, a context manager that mounts
a backing folder through the daemon (a process of its own) and cuts the power on command.

    with PowerCutMount(backing, mount) as fs:
        ...                      # set up under ``mount``
        fs.sync_all()            # the setup is durable
        ...                      # the workload, killed at a crash point
        report = fs.cut(tear=4096)
        fs.remount()             # the power is back: a fresh mount, no stale cache
        ...                      # recover and check under ``mount``

Between ``cut`` and ``remount`` every request fails with EIO; what the kernel still has
cached (pages, names) it may serve until the remount, so read nothing then. A remount without
a cut forgets what was unsynced (as ``sync_all`` does). The mount is unmounted on exit even
when the test fails (lazily when files are still open), and a mount left by a crashed run at
the same place is unmounted before the next one starts.

The daemon's bookkeeping (its graveyard of removed entries, its log) is in ``work``, a folder
beside the backing folder (it must be on the same file system).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes.util
import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from binlake_dev.powercut.control import PowerCutError, request
from binlake_dev.powercut.reports import CutReport, Stats
from binlake_dev.procs import spawn, stop_child, wait_for

FUSE_DEVICE = Path("/dev/fuse")
#: Mounts started and not stopped yet: unmounted when the interpreter exits.
_running: set[PowerCutMount] = set()


def unavailable_reason() -> str | None:
    """Why the power-cut file system cannot run here (what to install), or None."""
    if not FUSE_DEVICE.exists():
        return "no /dev/fuse: load the fuse module (or pass --device /dev/fuse to the container)"
    if not os.access(FUSE_DEVICE, os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable: run as root"
    if ctypes.util.find_library("fuse3") is None or shutil.which("fusermount3") is None:
        return "libfuse 3 is not installed: `make deps` (apt-get install fuse3 libfuse3-3)"
    if importlib.util.find_spec("mfusepy") is None:
        return "the mfusepy binding is not installed: `make venv` (pip install mfusepy)"
    return None


class PowerCutUnavailableError(RuntimeError):
    """The power-cut file system cannot run on this machine (``unavailable_reason``)."""


class PowerCutMount:
    """``backing`` mounted at ``mount`` through the power-cut daemon (see the module doc)."""

    def __init__(
        self, backing: Path, mount: Path, *, work: Path | None = None, ready_s: float = 15.0
    ) -> None:
        self.backing = backing.resolve()
        self.mount = Path(os.path.realpath(mount.parent)) / mount.name
        self.work = work or self.backing.parent / f".{self.backing.name}.powercut"
        self.log = self.work / "daemon.log"
        self._ready_s = ready_s
        self._control = f"binlake-powercut-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._daemon: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PowerCutMount:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The daemon's process id (None when stopped)."""
        return None if self._daemon is None else self._daemon.pid

    def start(self) -> None:
        """Mount (after unmounting whatever a crashed run left there)."""
        reason = unavailable_reason()
        if reason is not None:
            raise PowerCutUnavailableError(reason)
        unmount(self.mount)
        self.mount.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "binlake_dev.powercut.daemon"]
        argv += [str(self.backing), str(self.mount), "--control", self._control]
        argv += ["--graveyard", str(self.work / "graves")]
        daemon = self._daemon = spawn(argv, log=self.log)
        _running.add(self)
        try:
            wait_for(
                lambda: True if mounted(self.mount) and self._answers() else None,
                timeout_s=self._ready_s,
                what=f"power-cut file system at {self.mount}",
                alive=lambda: daemon.poll() is None,
                log=self.log,
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Unmount (lazily when files are still open there) and stop the daemon."""
        clean = unmount(self.mount)
        if self._daemon is not None:
            if clean:  # it exits by itself once unmounted; after a lazy unmount it would wait
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._daemon.wait(5.0)
            stop_child(self._daemon, timeout_s=10.0)
            self._daemon = None
        unmount(self.mount)  # a daemon killed before it unmounted leaves a dead mount
        _running.discard(self)

    def remount(self) -> None:
        """A fresh daemon and mount: nothing cached survives, nothing is unsynced."""
        self.stop()
        self.start()

    def cut(self, tear: int | None = None, seed: int | None = None) -> CutReport:
        """Cut the power now: the backing folder goes back to its durable state (``tear``:
        512 or 4096 to keep a prefix of the newest unsynced write; ``seed``: which one)."""
        return CutReport.from_json(self._request("cut", tear=tear, seed=seed))

    def power_cut(self, tear: int | None = None, seed: int | None = None) -> CutReport:
        """``cut`` then ``remount``."""
        report = self.cut(tear, seed)
        self.remount()
        return report

    def stats(self) -> Stats:
        return Stats.from_json(self._request("stats"))

    def sync_all(self) -> None:
        """Everything written so far is durable (the state after a test's setup)."""
        self._request("sync-all")

    def _request(self, command: str, **args: Any) -> dict[str, Any]:
        if self._daemon is None or self._daemon.poll() is not None:
            raise PowerCutError(f"the power-cut daemon of {self.mount} is not running")
        return request(self._control, {"command": command, **args})

    def _answers(self) -> bool:
        try:
            request(self._control, {"command": "ping"}, timeout_s=2.0)
        except PowerCutError:
            return False
        return True


# Registered after binlake_dev.procs' own exit hook, so it runs before it (last in, first
# out): the mounts are unmounted before that hook kills what is left of their daemons.
@atexit.register
def _stop_running() -> None:
    for mount in list(_running):
        with contextlib.suppress(Exception):
            mount.stop()


def mounted(path: Path) -> bool:
    """Whether something is mounted at ``path`` (read from /proc, without touching it: a
    dead FUSE mount fails every stat)."""
    wanted = str(path)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
        for line in table:
            point = line.split(" ", 5)[4]
            if _unescape(point) == wanted:
                return True
    return False


def _unescape(point: str) -> str:
    """/proc/self/mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code in ("040", "011", "012", "134"):
        point = point.replace("\\" + code, chr(int(code, 8)))
    return point


def unmount(path: Path) -> bool:
    """Unmount everything mounted at ``path``: normally, else lazily (when files are still
    open there, or the daemon is dead). Whether every unmount was a normal one."""
    fusermount = shutil.which("fusermount3") or "fusermount3"
    ways = ([fusermount, "-u"], [fusermount, "-u", "-z"], ["umount", "-l"])
    clean = True
    for attempt in range(9):
        if not mounted(path):
            return clean
        way = ways[min(attempt, len(ways) - 1)]
        done = subprocess.run([*way, str(path)], check=False, capture_output=True)
        clean = clean and done.returncode == 0 and attempt == 0
    if mounted(path):
        raise PowerCutError(f"{path} is still mounted after 9 unmounts")
    return clean
