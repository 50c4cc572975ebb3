"""The power-cut daemon: ``python -m binlake_dev.powercut.daemon ROOT MOUNT --control NAME
--graveyard DIR`` mounts ROOT at MOUNT and serves it until unmounted (or SIGTERM), answering
the test on the control socket NAME. A process of its own, so that neither the process under
test (killed at a crash point) nor the test's own threads can stop or slow it; it unmounts
itself and exits when its parent (the test) dies.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from binlake_dev.powercut.control import serve
from binlake_dev.powercut.disk import PowerCutDisk
from binlake_dev.powercut.fuseops import PowerCutFUSE, PowerCutOperations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="binlake_dev.powercut.daemon")
    parser.add_argument("root")
    parser.add_argument("mount")
    parser.add_argument("--control", required=True, help="abstract Unix socket name")
    parser.add_argument("--graveyard", required=True, help="folder on ROOT's file system")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    if os.stat(args.root).st_dev != os.stat(os.path.dirname(args.graveyard)).st_dev:
        print(f"powercut: {args.graveyard} is not on the file system of {args.root}", flush=True)
        return 2
    # One descriptor per open handle and per file with unsynced data.
    _, most = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (most, most))

    lock = threading.Lock()
    operations = PowerCutOperations(PowerCutDisk(args.root, args.graveyard), lock)
    serve(args.control, lambda request: _answer(operations, request))
    threading.Thread(target=_follow_parent, args=(args.mount,), daemon=True).start()
    PowerCutFUSE(
        operations,
        args.mount,
        foreground=True,
        nothreads=True,
        fsname="powercut",
        hard_remove=True,
        use_ino=True,
        kernel_cache=True,
    )
    return 0


def _answer(operations: PowerCutOperations, request: dict[str, Any]) -> dict[str, Any]:
    command = request["command"]
    with operations.guard:
        disk = operations.disk
        if command == "ping":
            return {"pid": os.getpid()}
        if command == "stats":
            return disk.stats().to_json()
        if command == "sync-all":
            disk.sync_all()
            return {}
        if command == "cut":
            operations.powered = False
            return disk.cut(request.get("tear"), request.get("seed")).to_json()
    raise ValueError(f"unknown command {command!r}")


def _follow_parent(mount: str) -> None:
    """Unmount and stop when the test that started us is gone (no mount left behind)."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    unmount = shutil.which("fusermount3")
    command = [unmount, "-u", "-z", mount] if unmount else ["umount", "-l", mount]
    subprocess.run(command, check=False, capture_output=True)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
