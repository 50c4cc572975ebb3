"""Consistent cuts, the pure part: what a cut is, which cut an ``--at`` names, which cuts the
retention keeps (docs/architecture.md, "Consistent cuts"; docs/format.md, "The cuts table").

A cut says: at the source position ``position`` (GTID state ``gtid``), every replicated table
listed in ``tables`` is exactly its Iceberg snapshot ``snapshot``; the tables in ``pending``
had no such snapshot (a copy still running, or catching up to its copy's position). The
applier records one after a batch's tables are committed (``binlake.apply.cuts``); readers
pick one by ``select`` and read each table ``VERSION AS OF`` its snapshot.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from binlake.config import Config
from binlake.errors import CutNotFoundError, CutTableError
from binlake.gtid import GtidState, MariaGtidState, MysqlGtidSet
from binlake.position import SourcePosition, at_or_before, parse_position

#: Why a table has no snapshot in a cut.
COPYING = "copy running"
CATCHING_UP = "catching up to its copy's position"


@dataclass(frozen=True)
class TableAt:
    """A table's Iceberg table (catalog-relative identifier) and its snapshot at a cut."""

    identifier: tuple[str, str]
    snapshot: int


@dataclass(frozen=True)
class Cut:
    cut_id: int
    position: SourcePosition
    #: The source's GTID state at ``position`` ("" when the source logs none).
    gtid: str
    #: The source's commit time of the last transaction at or before ``position`` (epoch s).
    source_time: int
    #: When the cut was recorded (epoch ms).
    recorded_ms: int
    #: The applier's batch number the cut follows.
    batch: int
    #: Source table ("db.table") -> its lake table and snapshot.
    tables: Mapping[str, TableAt] = field(default_factory=dict)
    #: Source table -> why it has no consistent snapshot at this cut.
    pending: Mapping[str, str] = field(default_factory=dict)
    #: The replication that recorded it (``origin_of``): a cuts table may hold the cuts of
    #: several replications; each reads and prunes only its own.
    origin: str = ""

    def table(self, name: str) -> TableAt:
        """The named table at this cut (``db.table``, case as the source has it)."""
        found = self.tables.get(name)
        if found is not None:
            return found
        if name in self.pending:
            why = f"{name} has no consistent snapshot at cut {self.cut_id}: {self.pending[name]}"
        else:
            why = (
                f"{name} is not in cut {self.cut_id} (at {self.position}): not a replicated "
                "table, or added after the cut"
            )
        raise CutTableError(why, table=name, at=str(self.cut_id))

    # ---- the cuts table's row (docs/format.md) -----------------------------------------

    def row(self) -> dict[str, object]:
        return {
            "cut_id": self.cut_id,
            "position": str(self.position),
            "gtid": self.gtid,
            "source_time": self.source_time,
            "recorded_ms": self.recorded_ms,
            "batch": self.batch,
            "tables": json.dumps(
                {
                    name: {"lake": list(at.identifier), "snapshot": at.snapshot}
                    for name, at in sorted(self.tables.items())
                },
                separators=(",", ":"),
            ),
            "pending": json.dumps(dict(sorted(self.pending.items())), separators=(",", ":")),
            "origin": self.origin,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Cut:
        tables = json.loads(str(row["tables"]))
        return cls(
            cut_id=int(str(row["cut_id"])),
            position=parse_position(str(row["position"])),
            gtid=str(row["gtid"] or ""),
            source_time=int(str(row["source_time"])),
            recorded_ms=int(str(row["recorded_ms"])),
            batch=int(str(row["batch"])),
            tables={
                name: TableAt((str(t["lake"][0]), str(t["lake"][1])), int(t["snapshot"]))
                for name, t in tables.items()
            },
            pending={str(k): str(v) for k, v in json.loads(str(row["pending"])).items()},
            origin=str(row.get("origin") or ""),
        )

    def describe(self) -> dict[str, object]:
        """The cut as ``binlake cut --json`` prints it (without the SQL)."""
        return {
            "cut_id": self.cut_id,
            "position": str(self.position),
            "gtid": self.gtid,
            "source_time": _iso(self.source_time),
            "recorded_at": _iso(self.recorded_ms / 1000),
            "batch": self.batch,
            "tables": {n: t.snapshot for n, t in sorted(self.tables.items())},
            "pending": dict(sorted(self.pending.items())),
        }


#: The columns of the cuts table, in order, with their Spark SQL types.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("cut_id", "BIGINT"),
    ("position", "STRING"),
    ("gtid", "STRING"),
    ("source_time", "BIGINT"),
    ("recorded_ms", "BIGINT"),
    ("batch", "BIGINT"),
    ("tables", "STRING"),
    ("pending", "STRING"),
    ("origin", "STRING"),
)


def origin_of(config: Config) -> str:
    """A replication's origin: its source's address and a digest of the tables it replicates
    where (``[tables]`` include/exclude, ``[target]`` namespace_map): two replications of one
    source into one catalog keep apart in one cuts table."""
    tables, target = config.tables, config.target
    selection = repr(
        (
            [str(g) for g in tables.include],
            [str(g) for g in tables.exclude],
            sorted(target.namespace_map.items()),
        )
    )
    digest = hashlib.sha256(selection.encode("utf-8")).hexdigest()[:12]
    return f"{config.source.host}:{config.source.port}/{digest}"


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="seconds")


# ---- --at ----------------------------------------------------------------------------------

_POSITION = re.compile(r"^[^\s:]+:\d+$")
_MARIA_GTID = re.compile(r"^\d+-\d+-\d+(,\s*\d+-\d+-\d+)*$")


@dataclass(frozen=True)
class At:
    """What ``--at`` names: the latest cut, or the newest at or before a position, a GTID
    state or a time (epoch seconds, source time)."""

    text: str
    position: SourcePosition | None = None
    gtid: GtidState | None = None
    time_s: float | None = None


def parse_at(text: str) -> At:
    """``latest``, ``file:offset``, a GTID state (MariaDB ``d-s-n,...`` or MySQL
    ``uuid:1-5,...``), or a time (ISO 8601, UTC unless it says otherwise, or epoch seconds)."""
    value = text.strip()
    if value in ("", "latest"):
        return At("latest")
    if _MARIA_GTID.match(value):
        return At(value, gtid=MariaGtidState.parse(value))
    if _POSITION.match(value) and not value[0].isdigit():
        return At(value, position=parse_position(value))
    try:
        return At(value, gtid=MysqlGtidSet.parse(value))
    except ValueError:
        pass
    try:
        return At(value, time_s=float(value))
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise CutNotFoundError(
            f"--at {text!r} is not latest, a binlog position (file:offset), a GTID state or a time",
            at=text,
            hint="e.g. --at latest, --at mariadb-bin.000003:4567, --at 0-1-42, "
            "--at 2026-11-27T09:00:00",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return At(value, time_s=when.timestamp())


def _gtid_at_or_before(cut: Cut, at: GtidState) -> bool:
    """The cut's GTID state is contained in ``at`` (a cut without one never is)."""
    if not cut.gtid:
        return False
    try:
        if isinstance(at, MariaGtidState):
            return at.contains(MariaGtidState.parse(cut.gtid))
        return at.contains(MysqlGtidSet.parse(cut.gtid))
    except ValueError:
        return False


def _at_or_before(cut: Cut, at: At) -> bool:
    if at.position is not None:
        return at_or_before(cut.position, at.position)
    if at.gtid is not None:
        return _gtid_at_or_before(cut, at.gtid)
    if at.time_s is not None:
        return cut.source_time <= at.time_s
    return True


def select(cuts: Sequence[Cut], at: At) -> Cut:
    """The newest cut at or before ``at`` (cuts in any order); ``CutNotFoundError`` when
    there is none."""
    ordered = sorted(cuts, key=lambda c: c.cut_id)
    for cut in reversed(ordered):
        if _at_or_before(cut, at):
            return cut
    if not ordered:
        raise CutNotFoundError(
            "no consistent cut is recorded yet",
            at=at.text,
            hint="binlake replicate records one after a batch once no table is still being "
            "copied ([cuts] every_s); is [cuts] enabled?",
        )
    oldest = ordered[0]
    raise CutNotFoundError(
        f"no retained cut is at or before {at.text}: the oldest is cut {oldest.cut_id} at "
        f"{oldest.position}"
        + (f" (GTID {oldest.gtid})" if oldest.gtid else "")
        + f", source time {_iso(oldest.source_time)}",
        at=at.text,
        oldest=str(oldest.position),
    )


# ---- retention -----------------------------------------------------------------------------


def retained(
    cuts: Iterable[Cut], *, now_s: float, keep_last: int, keep_every_s: float, keep_for_s: float
) -> set[int]:
    """The ids of the cuts to keep: the newest ``keep_last``, and the oldest cut of every
    ``keep_every_s`` interval (by source time) of the last ``keep_for_s`` seconds."""
    ordered = sorted(cuts, key=lambda c: c.cut_id)
    keep = {c.cut_id for c in ordered[-keep_last:]} if keep_last > 0 else set()
    first_in: dict[int, int] = {}
    for cut in ordered:
        if cut.source_time < now_s - keep_for_s:
            continue
        first_in.setdefault(int(cut.source_time // keep_every_s), cut.cut_id)
    return keep | set(first_in.values())


def protected_snapshots(cuts: Iterable[Cut], identifier: tuple[str, ...]) -> set[int]:
    """The snapshots of the table ``identifier`` that the cuts name (expiry keeps them)."""
    return {
        at.snapshot for cut in cuts for at in cut.tables.values() if at.identifier == identifier
    }
