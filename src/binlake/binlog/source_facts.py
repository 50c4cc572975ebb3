"""Source facts: what the receiver records in the relay log so that applying it needs no source.

Two facts of the source are not in its binlog, and the applier needs them:

* which ``BINARY(16)`` / ``BINARY(4)`` columns of a TABLE_MAP are MariaDB's UUID, INET6 or
  INET4 (the binlog logs them as plain binary strings; ``ColumnHints``);
* how the source converts times in a named or ``SYSTEM`` time zone, for an ALTER TABLE whose
  DEFAULT values depend on the statement's time or on a TIMESTAMP literal (``ZoneTimes``).

The receiver asks the source when it receives the event and writes the answer into the relay
log, inside the same group as the event (docs/format.md, "Source facts"): ``ColumnHints`` right
after the TABLE_MAP it describes, ``ZoneTimes`` right before the ALTER's QUERY. Inside the group,
a torn tail takes the fact with its transaction, and the fact is CRC32-checked like every event.

The event is MySQL/MariaDB's ``IGNORABLE_LOG_EVENT`` (type 28, post-header length 0) with the
``LOG_EVENT_IGNORABLE_F`` flag, so server tools skip it, and a body binlake owns:
``b"binlake\\0"``, a version byte (1), a kind byte (1: column hints, 2: zone times) and UTF-8
JSON. A type-28 event without that prefix is not ours and stays an ``UnknownEvent``; one with
it that cannot be read is an ``InvalidEventError`` (never skipped).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from binlake.binlog.constants import EventType
from binlake.binlog.encodings.mariadb_types import HINTS
from binlake.binlog.errors import InvalidEventError

__all__ = [
    "FACTS_MAGIC",
    "FACTS_VERSION",
    "ColumnHints",
    "SourceFactsEvent",
    "ZoneTimes",
    "decode_source_facts",
    "encode_source_facts",
    "is_source_facts",
]

FACTS_MAGIC = b"binlake\x00"
FACTS_VERSION = 1
KIND_COLUMN_HINTS = 1
KIND_ZONE_TIMES = 2
_LOCAL = "%Y-%m-%d %H:%M:%S.%f"


def _frozen(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class ColumnHints:
    """The source's answer for one table, when the receiver got its TABLE_MAP: column name ->
    ``uuid`` / ``inet4`` / ``inet6`` (columns of another type are absent)."""

    database: str
    table: str
    hints: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hints", _frozen(self.hints))


@dataclass(frozen=True, slots=True)
class ZoneTimes:
    """The source's own conversions in ``zone`` (``SYSTEM`` or a named zone) for one statement:
    ``local_times``: UTC second -> that second's local time; ``instants``: local time (with
    microseconds) -> (UTC second, microsecond)."""

    zone: str
    local_times: Mapping[int, dt.datetime] = field(default_factory=dict)
    instants: Mapping[dt.datetime, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "local_times", _frozen(self.local_times))
        object.__setattr__(self, "instants", _frozen(self.instants))


Fact = ColumnHints | ZoneTimes


@dataclass(frozen=True, slots=True)
class SourceFactsEvent:
    """The payload of a source-facts event (see the module docstring)."""

    fact: Fact
    type_code: int = EventType.IGNORABLE


def is_source_facts(body: bytes | memoryview) -> bool:
    """Whether an IGNORABLE event's body is binlake's (starts with ``FACTS_MAGIC``)."""
    return bytes(body[: len(FACTS_MAGIC)]) == FACTS_MAGIC


def encode_source_facts(event: SourceFactsEvent) -> bytes:
    fact = event.fact
    if isinstance(fact, ColumnHints):
        kind = KIND_COLUMN_HINTS
        document: dict[str, Any] = {
            "database": fact.database,
            "table": fact.table,
            "hints": dict(sorted(fact.hints.items())),
        }
    else:
        kind = KIND_ZONE_TIMES
        document = {
            "zone": fact.zone,
            "local_times": {
                str(s): local.strftime(_LOCAL) for s, local in sorted(fact.local_times.items())
            },
            "instants": {
                local.strftime(_LOCAL): [s, us] for local, (s, us) in sorted(fact.instants.items())
            },
        }
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return FACTS_MAGIC + bytes([FACTS_VERSION, kind]) + text.encode("utf-8")


def decode_source_facts(body: bytes | memoryview, offset: int = 0) -> SourceFactsEvent:
    """The facts in ``body`` (which ``is_source_facts``); a body that cannot be read is an
    ``InvalidEventError``."""
    data = bytes(body)
    head = len(FACTS_MAGIC)
    try:
        if len(data) < head + 2 or data[head] != FACTS_VERSION:
            raise ValueError(f"unknown source-facts version {data[head : head + 1].hex()}")
        document = json.loads(data[head + 2 :].decode("utf-8"))
        if not isinstance(document, dict):
            raise ValueError("the facts are not a JSON object")
        kind = data[head + 1]
        if kind == KIND_COLUMN_HINTS:
            return SourceFactsEvent(_column_hints(document))
        if kind == KIND_ZONE_TIMES:
            return SourceFactsEvent(_zone_times(document))
        raise ValueError(f"unknown source-facts kind {kind}")
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidEventError(
            f"unreadable source facts: {exc}", offset=offset, event_type="Ignorable"
        ) from None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


def _column_hints(document: dict[str, Any]) -> ColumnHints:
    hints = document["hints"]
    if not isinstance(hints, dict):
        raise TypeError("hints is not an object")
    out = {_text(name): _text(hint) for name, hint in hints.items()}
    unknown = sorted(set(out.values()) - HINTS)
    if unknown:
        raise ValueError(f"unknown column hints {unknown}")
    return ColumnHints(_text(document["database"]), _text(document["table"]), out)


def _zone_times(document: dict[str, Any]) -> ZoneTimes:
    local_times = {
        int(seconds): dt.datetime.strptime(_text(local), _LOCAL)
        for seconds, local in document["local_times"].items()
    }
    instants = {}
    for local, pair in document["instants"].items():
        seconds, micro = pair
        instants[dt.datetime.strptime(_text(local), _LOCAL)] = (int(seconds), int(micro))
    return ZoneTimes(_text(document["zone"]), local_times, instants)
