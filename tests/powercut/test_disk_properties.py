"""Property: after any sequence of file and directory operations, a cut leaves the backing
folder exactly as a simple reference model says the durable state is.

The reference keeps no undo log: each file has its content and the content it had at its last
fsync, each directory its entries and the entries it had at its last fsync; the durable tree is
read from the root's fsynced entries down. ``PowerCutDisk`` instead changes the folder in place
and undoes; the two must agree. Renames stay within one directory (across two, the reference's
snapshots and the disk's rule "both directories fsynced" differ by design: test_disk.py)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake_dev.powercut.disk import PowerCutDisk

FILE_NAMES = ("a", "b")
DIR_NAMES = ("d1", "d2")
#: Operation kinds, the common ones several times over (hypothesis draws them evenly).
KINDS = (
    *("create", "write", "append") * 3,
    *("fsync", "fsyncdir", "rename") * 2,
    *("truncate", "unlink", "mkdir", "rmdir", "rename_dir"),
)
OPS = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from((0, 0, 1, 2)),  # which folder: the root, or a subfolder if any
        st.integers(0, 1),  # which name: of a file, or of a subfolder for their operations
        st.integers(0, 1),  # the other name of a rename
        st.integers(0, 40),
        st.binary(min_size=1, max_size=24),
    ),
    min_size=4,
    max_size=40,
)


@dataclass
class RefFile:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""


@dataclass
class RefDir:
    entries: dict[str, RefFile | RefDir] = field(default_factory=dict)
    durable: dict[str, RefFile | RefDir] = field(default_factory=dict)


Tree = dict[str, "bytes | Tree"]


def durable_tree(folder: RefDir) -> Tree:
    return {
        name: durable_tree(node) if isinstance(node, RefDir) else node.durable
        for name, node in folder.durable.items()
    }


def backing_tree(path: Path) -> Tree:
    return {
        entry.name: backing_tree(entry) if entry.is_dir() else entry.read_bytes()
        for entry in path.iterdir()
    }


def write_into(data: bytearray, offset: int, chunk: bytes) -> None:
    data.extend(bytes(max(offset - len(data), 0)))
    data[offset : offset + len(chunk)] = chunk


class Both:
    """The disk and the reference, one operation at a time on both."""

    def __init__(self, disk: PowerCutDisk) -> None:
        self.disk = disk
        self.root = RefDir()

    def set_up(self) -> None:
        """A durable start, so that operations meet durable bytes and names: /a, /d1/a."""
        for kind, pick, name, data in [("write", 0, 0, b"A" * 16), ("mkdir", 0, 0, b"")]:
            self.apply(kind, pick, name, name, 0, data)
        self.apply("write", 1, 0, 0, 0, b"a" * 8)
        self.disk.sync_all()
        for folder in (self.root, self.root.entries["d1"]):
            assert isinstance(folder, RefDir)
            folder.durable = dict(folder.entries)
            for node in folder.entries.values():
                if isinstance(node, RefFile):
                    node.durable = bytes(node.data)

    def folders(self) -> list[tuple[str, RefDir]]:
        subdirs = [(f"/{n}", d) for n, d in self.root.entries.items() if isinstance(d, RefDir)]
        return [("", self.root), *sorted(subdirs, key=lambda pair: pair[0])]

    def apply(self, kind: str, pick: int, name: int, other: int, number: int, chunk: bytes) -> None:
        path, folder = self.folders()[pick % len(self.folders())]
        if kind in ("mkdir", "rmdir", "rename_dir"):
            self.apply_to_root(kind, DIR_NAMES[name], DIR_NAMES[other])
        elif kind == "fsyncdir":
            self.disk.fsyncdir(path or "/")
            folder.durable = dict(folder.entries)
        else:
            file, to = FILE_NAMES[name], FILE_NAMES[other]
            self.apply_to_file(kind, f"{path}/{file}", folder, file, to, number, chunk)

    def apply_to_file(
        self, kind: str, path: str, folder: RefDir, name: str, other: str, n: int, chunk: bytes
    ) -> None:
        file = folder.entries.get(name)
        if kind in ("create", "write", "append") and file is None:  # writes create
            self.disk.release(self.disk.create(path, os.O_WRONLY, 0o644))
            file = folder.entries[name] = RefFile()
        if not isinstance(file, RefFile):
            return
        fh = self.disk.open(path, os.O_RDWR | (os.O_APPEND if kind == "append" else 0))
        if kind in ("write", "append"):  # writes land on the file's bytes, or just past them
            offset = len(file.data) if kind == "append" else n % (len(file.data) + 4)
            self.disk.write(fh, chunk, offset)
            write_into(file.data, offset, chunk)
        elif kind == "truncate":
            n %= len(file.data) + 8
            self.disk.truncate(None, n, fh)
            del file.data[n:]
            file.data.extend(bytes(max(n - len(file.data), 0)))
        elif kind == "fsync":
            self.disk.fsync(fh)
            file.durable = bytes(file.data)
        self.disk.release(fh)
        if kind == "unlink":
            self.disk.unlink(path)
            del folder.entries[name]
        elif kind == "rename" and other != name:  # file names are never folder names
            self.disk.rename(path, f"{os.path.dirname(path)}/{other}")
            folder.entries[other] = folder.entries.pop(name)

    def apply_to_root(self, kind: str, name: str, other: str) -> None:
        entries = self.root.entries
        found = entries.get(name)
        if kind == "mkdir" and found is None:
            self.disk.mkdir(f"/{name}", 0o755)
            entries[name] = RefDir()
        elif kind == "rmdir" and isinstance(found, RefDir) and not found.entries:
            self.disk.rmdir(f"/{name}")
            del entries[name]
        elif kind == "rename_dir" and isinstance(found, RefDir):
            target = entries.get(other)
            if other != name and (target is None or not target.entries):
                self.disk.rename(f"/{name}", f"/{other}")
                entries[other] = entries.pop(name)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_a_cut_leaves_exactly_the_durable_state_of_the_reference(
    ops: list[tuple[str, int, int, int, int, bytes]],
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch, "root")
        root.mkdir()
        both = Both(PowerCutDisk(str(root), os.path.join(scratch, "graves")))
        both.set_up()
        for op in ops:
            both.apply(*op)
        assert backing_tree(root) == _current(both.root)
        both.disk.cut()
        assert backing_tree(root) == durable_tree(both.root)
        assert os.listdir(os.path.join(scratch, "graves")) == []


def _current(folder: RefDir) -> Tree:
    return {
        name: _current(node) if isinstance(node, RefDir) else bytes(node.data)
        for name, node in folder.entries.items()
    }
