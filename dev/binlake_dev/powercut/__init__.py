"""A power-cut file system for the crash tests (issue #38): a FUSE passthrough over a backing
folder that remembers what is not durable yet and, on command, throws it away as a power cut
would.

What is modelled (``disk``): a file's data is durable once the file is fsynced (fsync,
fdatasync, or a write through an O_SYNC/O_DSYNC handle); a directory entry (create, mkdir,
symlink, unlink, rmdir, rename) once its directory is fsynced (both directories for a rename
across two). A cut reverts every file to its content and size at its last fsync
(``unsynced``), undoes every entry operation not made durable, newest first (``entries``: a
file whose creation was not made durable disappears, a rename over an existing file comes
undone and the old file is back), and with a tear (512 or 4096 bytes) keeps a prefix of the
newest unsynced write (a sequential run of write requests to one file) that ends on a multiple
of the tear size.

What is not: writes that reached the disk before the power went (a cut keeps nothing unsynced,
the tear aside), reordering of writes, a disk's own write cache that loses synced data, a
journaling file system that makes every earlier metadata change durable at any fsync, inode
metadata (mode, owner, times), and hard links.

How (``fuseops``, ``daemon``, ``mount``): libfuse 3 through the ``mfusepy`` binding, in a
daemon process of its own, controlled over a Unix socket (``control``); the kernel keeps locks
(fcntl, flock) and caches pages (mmap works), and after a cut the test remounts, so that no
stale page survives. ``PowerCutMount`` is the test's handle; ``unavailable_reason`` says what
to install where the machine cannot run it. Test support only: binlake never imports it.
"""

from binlake_dev.powercut.control import PowerCutError
from binlake_dev.powercut.mount import PowerCutMount, PowerCutUnavailableError, unavailable_reason
from binlake_dev.powercut.reports import CutReport, Stats, TornWrite

__all__ = [
    "CutReport",
    "PowerCutError",
    "PowerCutMount",
    "PowerCutUnavailableError",
    "Stats",
    "TornWrite",
    "unavailable_reason",
]
