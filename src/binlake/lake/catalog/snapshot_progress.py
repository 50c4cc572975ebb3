"""How far a table's snapshot got: the ``binlake.snapshot`` property of its copy's commits.

Each commit of a copy (one or more chunk files, or the last, empty one) carries, besides
``binlake.position`` (the position streaming replays the table from), this record as JSON:

* ``v``: 2 (records without it were written by binlake's chunk-by-chunk copy, version 1);
* ``id``: the snapshot (``snapshot.plan`` entry) the commit belongs to;
* ``next``: the key every chunk before it holds (typed JSON values, ``encode_key``): the rows
  of every key below ``next`` are committed, a resumed copy reads the keys from ``next`` on;
  None when every chunk is committed. Version 1 had ``after`` instead, the key of the last row
  committed (the next chunk read the keys after it);
* ``consistent``: where the table starts to equal the source once ``done``: the copy's high
  position (``binlake.snapshot.copier``). Until streaming has applied the table up to there,
  its rows are of different moments: ``binlake verify`` waits or retries before it;
* ``rows``: rows copied so far; ``done``: the copy is complete.

Reading the newest summary of a table thus tells, after any crash, whether its snapshot with a
given id is done, or which keys are left: the data and the progress are one commit.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlake.position import SourcePosition, parse_position

SNAPSHOT = "binlake.snapshot"
VERSION = 2


@dataclass(frozen=True, slots=True)
class SnapshotProgress:
    id: str
    #: Version 1 only: the key of the last row committed.
    after: tuple[Any, ...] | None
    consistent: SourcePosition
    rows: int
    done: bool
    #: Version 2: the keys from here on are not committed yet (None: none are left).
    next: tuple[Any, ...] | None = None
    version: int = VERSION

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "id": self.id,
            "consistent": str(self.consistent),
            "rows": self.rows,
            "done": self.done,
        }
        if self.version >= VERSION:
            data["v"] = self.version
            data["next"] = None if self.next is None else encode_key(self.next)
        else:
            data["after"] = None if self.after is None else encode_key(self.after)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def progress_of(summary: Mapping[str, str] | None) -> SnapshotProgress | None:
    """The snapshot record of a commit's summary (None when it has none or it is unreadable)."""
    if summary is None or SNAPSHOT not in summary:
        return None
    try:
        data = json.loads(summary[SNAPSHOT])
        version = int(data.get("v", 1))
        after = data["after"] if version < VERSION else None
        following = data["next"] if version >= VERSION else None
        return SnapshotProgress(
            id=str(data["id"]),
            after=None if after is None else decode_key(after),
            consistent=parse_position(str(data["consistent"])),
            rows=int(data["rows"]),
            done=bool(data["done"]),
            next=None if following is None else decode_key(following),
            version=version,
        )
    except (ValueError, KeyError, TypeError):
        return None


# ---- key values as typed JSON -------------------------------------------------------------------


def encode_key(values: Sequence[Any]) -> list[list[Any]]:
    """Key values as read by PyMySQL -> ``[[tag, value], ...]`` that round-trips exactly."""
    return [_encode(value) for value in values]


def _encode(value: Any) -> list[Any]:
    if value is None:
        return ["n", None]
    if isinstance(value, bool | int):
        return ["i", int(value)]
    if isinstance(value, Decimal):
        return ["d", format(value, "f")]
    if isinstance(value, float):
        return ["f", value.hex()]
    if isinstance(value, str):
        return ["s", value]
    if isinstance(value, bytes | bytearray):
        return ["b", base64.b64encode(bytes(value)).decode("ascii")]
    if isinstance(value, dt.datetime):
        return ["t", value.isoformat(sep=" ")]
    if isinstance(value, dt.date):
        return ["t", value.isoformat()]
    if isinstance(value, dt.timedelta):
        return ["t", _time_text(value)]
    raise TypeError(f"key value of type {type(value).__name__} cannot be recorded")


def decode_key(data: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
    """The inverse of ``encode_key``; temporal values come back as text MariaDB compares
    exactly."""
    out: list[Any] = []
    for tag, value in data:
        if tag == "n":
            out.append(None)
        elif tag == "i":
            out.append(int(value))
        elif tag == "d":
            out.append(Decimal(value))
        elif tag == "f":
            out.append(float.fromhex(value))
        elif tag in ("s", "t"):
            out.append(str(value))
        elif tag == "b":
            out.append(base64.b64decode(value))
        else:
            raise ValueError(f"unknown key tag {tag!r}")
    return tuple(out)


def _time_text(value: dt.timedelta) -> str:
    micros = value // dt.timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return f"{sign}{hours:02d}:{minute:02d}:{second:02d}.{micro:06d}"
