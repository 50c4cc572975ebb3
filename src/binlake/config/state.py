"""``[state]``: the folder binlake owns, and the paths of what it keeps there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from binlake.config.section import Section, setting
from binlake.config.values import path_value

__all__ = ["StateConfig"]


@dataclass(frozen=True, kw_only=True)
class StateConfig(Section):
    """``[state]``: the folder binlake owns (relay log, checkpoint, source state, lock)."""

    dir: Path = setting(
        "path", path_value, doc="the state folder: relay log, checkpoint, source state, lock"
    )

    @property
    def relay_dir(self) -> Path:
        return self.dir / "relay"

    @property
    def checkpoint_path(self) -> Path:
        return self.dir / "relay.checkpoint"

    @property
    def source_state_path(self) -> Path:
        return self.dir / "source.state"

    @property
    def snapshot_plan_path(self) -> Path:
        return self.dir / "snapshot.plan"

    @property
    def snapshot_requests_dir(self) -> Path:
        return self.dir / "snapshot-requests"

    @property
    def keyindex_dir(self) -> Path:
        return self.dir / "keyindex"
