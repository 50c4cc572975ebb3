"""Another process holding a state folder's expiry lock (``binlake.storage.expiry_lock``), as
`binlake maintain`'s expiry does: shared by the unit and integration tests of the lock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Takes the expiry lock of the folder in argv[1], says so, holds it until stdin closes.
_HOLDER = """
import sys
from pathlib import Path
from binlake.storage.expiry_lock import ExpiryLock
with ExpiryLock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def start_expiry_holder(state_dir: Path) -> subprocess.Popen[str]:
    """The holder process, started and holding the lock when this returns."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    return holder


def let_go(holder: subprocess.Popen[str]) -> None:
    """Close the holder's stdin: it releases the lock and ends."""
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=60)


@contextmanager
def expiry_lock_held_by_another_process(state_dir: Path) -> Iterator[None]:
    holder = start_expiry_holder(state_dir)
    try:
        yield
    finally:
        let_go(holder)
