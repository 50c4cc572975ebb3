"""The open-file limit a run raises at start, and the budget of key indexes kept open under it
(``binlake.storage.open_files``, ``binlake.keyindex.open_set``)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from binlake.errors import KeyIndexUntrustedError
from binlake.keyindex.encode import encode_keys
from binlake.keyindex.folder import IndexFolder
from binlake.keyindex.open_set import OpenIndexes
from binlake.keyindex.store import KeyIndex
from binlake.storage.open_files import (
    FILES_PER_INDEX,
    MIN_OPEN_INDEXES,
    RESERVED_FILES,
    index_budget,
)

SPEC = "1:int"


def test_the_budget_leaves_reserved_files_and_three_per_index_above_a_floor() -> None:
    assert index_budget(1024) == (1024 - RESERVED_FILES) // FILES_PER_INDEX == 170
    assert index_budget(1 << 20) == ((1 << 20) - RESERVED_FILES) // 3
    assert index_budget(256) == MIN_OPEN_INDEXES


RAISE = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))\n"
    "from binlake.storage.open_files import raise_open_file_limit\n"
    "print(raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
)


@pytest.mark.parametrize(("soft", "hard", "after"), [(256, 4096, 4096), (256, 256, 256)])
def test_a_run_raises_its_soft_open_file_limit_to_the_hard_one_when_it_can(
    soft: int, hard: int, after: int
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RAISE, str(soft), str(hard)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [str(after), str(after)]


def index_of(folder: IndexFolder, uuid: str) -> KeyIndex:
    builder = folder.builder(uuid, SPEC)
    builder.add("/lake/t/data/a.parquet", encode_keys([pa.array([1, 2], pa.int64())]), range(2))
    builder.finish(7)
    return folder.install(builder)


def test_beyond_the_budget_the_least_recently_used_idle_index_is_closed_and_reopens(
    tmp_path: Path,
) -> None:
    folder = IndexFolder(tmp_path)
    uuids = [f"7d3b1c6e-0000-4000-8000-00000000000{i}" for i in range(4)]
    indexes = OpenIndexes(budget=2)
    busy = {uuids[0]}
    for uuid in uuids[:3]:
        indexes.add(uuid, index_of(folder, uuid), lambda u: u in busy)
    # uuids[0] is in use: the least recently used idle one, uuids[1], was closed.
    assert len(indexes) == 2 and indexes.closed_for_budget == 1
    assert indexes.get(uuids[1]) is None and indexes.get(uuids[0]) is not None
    assert uuids[1] in indexes.checked  # its reopen skips the whole-file check
    reopened = folder.open(uuids[1], SPEC, verify=uuids[1] not in indexes.checked)
    assert reopened.lookup(encode_keys([pa.array([2], pa.int64())])) == {
        encode_keys([pa.array([2], pa.int64())])[0]: (1, 1)
    }
    busy.clear()
    indexes.add(uuids[1], reopened, lambda u: u in busy)
    # uuids[0] was used most recently before uuids[1] came back: uuids[2] goes.
    assert indexes.get(uuids[2]) is None and indexes.closed_for_budget == 2
    assert indexes.pop(uuids[1]) is reopened and uuids[1] not in indexes.checked
    reopened.close()
    indexes.close_all()
    assert len(indexes) == 0


def test_an_index_closed_for_the_budget_before_its_check_passed_is_checked_again(
    tmp_path: Path,
) -> None:
    folder = IndexFolder(tmp_path)
    uuids = [f"7d3b1c6e-0000-4000-8000-00000000001{i}" for i in range(2)]
    for uuid in uuids:
        index_of(folder, uuid).close()
    damaged = folder.current(uuids[0])
    assert damaged is not None
    conn = sqlite3.connect(damaged)
    conn.execute("DELETE FROM entries WHERE pos = 0")  # an entry lost: only the count tells
    conn.commit()
    conn.close()
    indexes = OpenIndexes(budget=1)
    indexes.add(uuids[0], folder.open(uuids[0], SPEC, verify=True), lambda u: False)
    indexes.add(uuids[1], folder.open(uuids[1], SPEC, verify=True), lambda u: False)
    assert indexes.closed_for_budget == 1
    assert uuids[0] not in indexes.checked and uuids[1] in indexes.checked
    with pytest.raises(KeyIndexUntrustedError) as error:
        folder.open(uuids[0], SPEC, verify=uuids[0] not in indexes.checked).confirm()
    assert error.value.reason == "damaged"
    indexes.close_all()
