"""The key indexes one applier keeps open, at most a budget of them
(``binlake.storage.open_files.index_budget``).

Opening one more than the budget closes the least recently used index no batch is using; its
file stays as it is (an index is closed between two transactions, never inside one), and the
next batch of its table opens it again. The whole-file check an index gets the first time a
process opens it (``KeyIndex.open(verify=True)``: its structure and its count of entries) is not
repeated at a reopen: ``checked`` remembers the tables whose index passed it in this process (an
index closed before its check was confirmed is checked again).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from binlake.keyindex.store import KeyIndex


class OpenIndexes:
    """Open indexes by table UUID, least recently used first. Not thread-safe: its owner holds
    a lock around every call."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._open: OrderedDict[str, KeyIndex] = OrderedDict()
        #: Tables whose index passed the whole-file check in this process.
        self.checked: set[str] = set()
        #: Indexes closed to stay within the budget.
        self.closed_for_budget = 0

    def __len__(self) -> int:
        return len(self._open)

    def get(self, table_uuid: str) -> KeyIndex | None:
        """The open index of ``table_uuid`` (now the most recently used), or None."""
        index = self._open.get(table_uuid)
        if index is not None:
            self._open.move_to_end(table_uuid)
        return index

    def add(self, table_uuid: str, index: KeyIndex, in_use: Callable[[str], bool]) -> None:
        """Keep ``index`` open; close the least recently used ones ``in_use`` does not name
        while more than the budget are open."""
        self._open[table_uuid] = index
        self._open.move_to_end(table_uuid)
        self.checked.add(table_uuid)
        for uuid in list(self._open):
            if len(self._open) <= self.budget:
                break
            if uuid != table_uuid and not in_use(uuid):
                closed = self._open.pop(uuid)
                if not _passed(closed):
                    self.checked.discard(uuid)  # checked again at its next open
                closed.close()
                self.closed_for_budget += 1

    def pop(self, table_uuid: str) -> KeyIndex | None:
        """Stop keeping ``table_uuid``'s index (the caller closes it); it is checked again at its
        next open."""
        self.checked.discard(table_uuid)
        return self._open.pop(table_uuid, None)

    def close_all(self) -> None:
        while self._open:
            _, index = self._open.popitem(last=False)
            index.close()


def _passed(index: KeyIndex) -> bool:
    """Whether ``index``'s whole-file check (if one ran beside its first batch) passed."""
    try:
        index.confirm()
    except Exception:  # any failure: the check runs again at the next open
        return False
    return True
