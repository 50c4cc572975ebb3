"""What the power-cut file system tells its test: its unsynced state (``Stats``) and what a cut
took (``CutReport``); plain data, sent as JSON over the control socket."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Stats:
    """The unsynced state: files whose data changed since their fsync, the durable bytes kept
    to revert them, the bytes they would lose past their synced size, entry operations whose
    directories were not fsynced since, and those directories."""

    files_unsynced: int
    bytes_held: int
    bytes_unsynced: int
    entries_unsynced: int
    dirs_unsynced: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Stats:
        return cls(**data)


@dataclass(frozen=True)
class TornWrite:
    """The write a cut tore: its file (path under the mount when first changed), where it
    started, how many of its bytes were kept (ending on a ``boundary``) and how many lost."""

    path: str
    offset: int
    kept: int
    lost: int
    boundary: int


@dataclass(frozen=True)
class CutReport:
    """What a cut took: the files reverted to their last fsync (paths under the mount when
    first changed), the bytes they lost past their synced size and the overwritten bytes put
    back, the entry operations undone and those that could not be (conflicts, left as they
    were: ``binlake_dev.powercut.entries``), and the torn write (with a tear)."""

    files_reverted: list[str] = field(default_factory=list)
    bytes_dropped: int = 0
    bytes_restored: int = 0
    entries_undone: int = 0
    entry_conflicts: int = 0
    torn: TornWrite | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CutReport:
        torn = data.pop("torn")
        return cls(**data, torn=None if torn is None else TornWrite(**torn))
