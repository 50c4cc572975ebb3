"""How a batch's rows reached a table: which write, and why not the row delta.

Every rows commit says it in its snapshot summary, beside the position: ``binlake.write`` is
``row-delta`` (keyed tables: new files and equality deletes, O(changes);
``binlake.lake.write.row_delta``), ``merge`` (keyed tables a row delta cannot serve;
``binlake.write-reason`` says why) or ``append`` (tables without a key: change-log rows).
``binlake status`` reads them back from the table (one source of truth), the applier counts
them per table in its metrics. Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

WRITE = "binlake.write"
WRITE_REASON = "binlake.write-reason"


class WritePath(StrEnum):
    ROW_DELTA = "row-delta"
    MERGE = "merge"
    APPEND = "append"


@dataclass(frozen=True)
class Write:
    path: WritePath
    #: Why a keyed table took MERGE (None for the other paths).
    reason: str | None = None

    def properties(self) -> dict[str, str]:
        """The summary properties that record it."""
        out = {WRITE: self.path.value}
        if self.reason:
            out[WRITE_REASON] = self.reason
        return out

    def describe(self) -> str:
        return self.path.value if not self.reason else f"{self.path.value} ({self.reason})"


def write_of(summary: Mapping[str, str]) -> Write | None:
    """The write a commit's summary records (None: not a rows commit, or made before binlake
    recorded it)."""
    text = summary.get(WRITE)
    try:
        path = WritePath(text) if text is not None else None
    except ValueError:
        return None
    return None if path is None else Write(path, summary.get(WRITE_REASON) or None)
