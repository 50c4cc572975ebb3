"""The process's limit on open files, and how many key indexes it leaves room for.

A wide database keeps one key index open per keyed table (``binlake.keyindex``: the SQLite file,
its ``-wal`` and its ``-shm``: ``FILES_PER_INDEX`` descriptors). Debian's default soft limit for
a login session is 1,024, far below what hundreds of tables need, while the hard limit is
usually much higher (1,048,576 or 524,288 under systemd). ``raise_open_file_limit`` raises the
soft limit to the hard one, as servers that hold many files do, once at the start of a run (the
Spark JVM binlake starts afterwards inherits it). ``index_budget`` is how many indexes may be
open at once within the limit: the applier closes the least recently used ones beyond it
(``binlake.keyindex.open_set``), so reaching the limit costs reopening files, never a failure.
"""

from __future__ import annotations

import contextlib
import resource

#: Descriptors one open key index holds (the file, its ``-wal`` and ``-shm``).
FILES_PER_INDEX = 3
#: Descriptors kept for everything else: the relay log and its index, sockets to the source and
#: the catalog, the Spark gateway, Parquet and Arrow files being written, the metrics server.
RESERVED_FILES = 512
#: Indexes kept open whatever the limit (a tiny limit still lets a few tables stay open).
MIN_OPEN_INDEXES = 8
#: The soft limit is never raised above this (an unlimited hard limit is not a usable soft one).
HIGHEST_SOFT_LIMIT = 1 << 20


def open_file_limit() -> int:
    """The process's soft limit on open files."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return HIGHEST_SOFT_LIMIT if soft == resource.RLIM_INFINITY else int(soft)


def raise_open_file_limit() -> int:
    """Raise the soft limit on open files to the hard limit (at most ``HIGHEST_SOFT_LIMIT``);
    the soft limit now. A limit that cannot be raised is left as it is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = HIGHEST_SOFT_LIMIT if hard == resource.RLIM_INFINITY else min(hard, HIGHEST_SOFT_LIMIT)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        # A limit the kernel refuses (a container's nr_open below the hard limit) stays.
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return open_file_limit()


def index_budget(soft_limit: int) -> int:
    """How many key indexes may be open at once under ``soft_limit`` open files."""
    return max(MIN_OPEN_INDEXES, (soft_limit - RESERVED_FILES) // FILES_PER_INDEX)
