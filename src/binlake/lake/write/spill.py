"""Net changes too many for memory: moved to disk in runs, composed again per key (pure).

``KeyedChanges`` holds the net change per key of a batch in a dict. One source transaction can
change millions of rows, and a batch never splits a transaction, so the dict is bounded
(``MAX_ENTRIES``): once it is full its entries are appended to a ``KeySpill`` as one *run* and
the dict starts empty. A key changed again later gets a new entry in a later run, built without
knowing the earlier one. ``composed()`` puts them together again, one bucket at a time:

* the entries of one key, in run order (the order they were spilled in), compose to one: its
  operation and row are the last run's, whether it existed before the batch is the first run's;
  a row lacking column values (MINIMAL/NOBLOB images) takes them from the runs before, back to
  the last delete; a delete of a key that did not exist before the batch is nothing;
* keys go to ``BUCKETS`` files by their hash, so all entries of a key are in one file, and
  composing reads one file at a time: memory holds one bucket, about 1/``BUCKETS`` of the keys.

The files are pickled entries in a temporary folder, removed by ``close`` (or at exit). A full
disk is ``DiskFullError`` (``binlake.storage.durable``).
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

from binlake.binlog.values import ABSENT
from binlake.storage.durable import raise_os_error

#: Net entries ``KeyedChanges`` holds in memory before it spills them as a run.
MAX_ENTRIES = 250_000
#: Files the spilled keys are spread over (one is read into memory at a time).
BUCKETS = 64

Row = tuple[Any, ...]
#: (key, op "U"/"D", row or None, existed before the batch)
Entry = tuple[Row, str, Row | None, bool]


class KeySpill:
    """Runs of net entries on disk, composed per key by ``composed`` (module docstring)."""

    def __init__(self, table: str, buckets: int = BUCKETS) -> None:
        self.table = table
        self.entries = 0
        #: Some spilled upsert lacks a column value.
        self.absent = False
        try:
            self.folder = tempfile.mkdtemp(prefix="binlake-spill-")
        except OSError as exc:
            raise_os_error(exc, tempfile.gettempdir(), "creating a spill folder")
        self._files: list[IO[bytes]] = []
        try:
            for i in range(buckets):
                self._files.append(open(os.path.join(self.folder, f"{i:03d}.pickle"), "w+b"))  # noqa: SIM115
        except OSError as exc:
            self.close()
            raise_os_error(exc, self.folder, "creating spill files")

    def add(self, entries: Iterable[Entry]) -> None:
        """Append one run (at most one entry per key): one pickled list per bucket."""
        files = self._files
        count = len(files)
        buckets: list[list[Entry]] = [[] for _ in files]
        for entry in entries:
            buckets[hash(entry[0]) % count].append(entry)
            row = entry[2]
            if row is not None and not self.absent and any(v is ABSENT for v in row):
                self.absent = True
        try:
            for handle, bucket in zip(files, buckets, strict=True):
                if bucket:
                    pickle.dump(bucket, handle, pickle.HIGHEST_PROTOCOL)
                    self.entries += len(bucket)
        except OSError as exc:
            raise_os_error(exc, self.folder, f"spilling net changes of {self.table}")

    def composed(self) -> Iterator[list[Entry]]:
        """The composed entries, one bucket's list at a time (deletes of keys that did not
        exist before the batch left out)."""
        for handle in self._files:
            merged: dict[Row, Entry] = {}
            try:
                handle.flush()
                handle.seek(0)
                while True:
                    try:
                        run: list[Entry] = pickle.load(handle)
                    except EOFError:
                        break
                    for entry in run:
                        earlier = merged.get(entry[0])
                        merged[entry[0]] = entry if earlier is None else then(earlier, entry)
            except OSError as exc:
                raise_os_error(exc, self.folder, f"reading spilled net changes of {self.table}")
            out = [e for e in merged.values() if e[1] == "U" or e[3]]
            if out:
                yield out

    def close(self) -> None:
        for handle in self._files:
            handle.close()
        self._files = []
        shutil.rmtree(self.folder, ignore_errors=True)

    def __del__(self) -> None:
        if self._files:
            self.close()


def then(earlier: Entry, later: Entry) -> Entry:
    """Two entries of one key from consecutive runs as one: the later operation and row (its
    missing values from the earlier row, unless that was a delete), whether the key existed
    before the batch from the earlier one. A delete of a key that did not exist is kept as
    such here (a later run may insert it again) and left out only at the end."""
    key, op, row, _ = later
    previous = earlier[2]
    if row is not None and previous is not None and any(v is ABSENT for v in row):
        row = tuple(p if v is ABSENT else v for v, p in zip(row, previous, strict=True))
    return (key, op, row, earlier[3])


def compose(entries: list[Entry]) -> Entry | None:
    """The net entry of one key from its entries in run order (module docstring); None when
    it is a delete of a key that did not exist before the batch."""
    entry = entries[0]
    for later in entries[1:]:
        entry = then(entry, later)
    return entry if entry[1] == "U" or entry[3] else None
