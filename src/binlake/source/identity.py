"""The source's identity, kept in ``<state>/source.state`` (a shadow-page file), and its check.

The relay log says *where* binlake is in the source's history; this file says *whose* history it
is. It holds no position (positions come from the relay log, WL#4621): only the flavor, the
server's id (and ``server_uuid`` on MySQL), the replication mode, and the server's GTID state
when the identity was recorded, which is a lower bound of that server's history forever after.

At every start the receiver compares the server it reached with the record and with the relay
log's restart point. A different server is refused (``SourceIdentityChangedError``) unless the
user passes ``--accept-new-source``; then the new identity is recorded with a shadow-page
prepare and commit, so that a crash leaves the old record or the new one, never a mix.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from binlake.binlog.format import Flavor
from binlake.config import ReplicationMode
from binlake.crashpoints import crash_point
from binlake.errors import SourceIdentityChangedError, StateFileCorruptError
from binlake.gtid import GtidState, parse_server_gtid_state
from binlake.relay.restart import RestartPoint
from binlake.source.client import ServerInfo
from binlake.storage.shadow import ShadowStateFile

PAYLOAD_VERSION = 1


@dataclass(frozen=True)
class SourceIdentity:
    flavor: str
    server_id: int
    #: MySQL's ``server_uuid`` (MariaDB has none).
    server_uuid: str | None
    mode: str
    #: The server's GTID state (gtid_binlog_pos / gtid_executed) when this was recorded.
    gtid_state_at_record: str
    #: Where it was reached when recorded (information for messages, not compared).
    address: str

    @classmethod
    def of_server(cls, server: ServerInfo, mode: ReplicationMode, address: str) -> SourceIdentity:
        return cls(
            server.flavor.value,
            server.server_id,
            server.server_uuid if server.flavor is Flavor.MYSQL else None,
            mode.value,
            server.gtid_binlog_pos or "",
            address,
        )

    def encode(self) -> bytes:
        body = {"version": PAYLOAD_VERSION, **asdict(self)}
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, path: Path) -> SourceIdentity:
        try:
            fields: Any = json.loads(raw.decode("utf-8"))
            if not isinstance(fields, dict) or fields.pop("version", None) != PAYLOAD_VERSION:
                raise ValueError("not a version 1 source identity")
            return cls(**fields)
        except (UnicodeDecodeError, ValueError, TypeError) as exc:
            raise StateFileCorruptError(
                f"the source identity cannot be read: {exc}",
                file=str(path),
                hint="restore source.state from a backup, or delete it and start with "
                "--accept-new-source after checking [source] points at the right server",
            ) from None

    def describe(self) -> str:
        who = (
            f"server_uuid {self.server_uuid}" if self.server_uuid else f"server_id {self.server_id}"
        )
        return f"{self.flavor} {who} (at {self.address})"


def identity_problems(
    recorded: SourceIdentity | None, server: ServerInfo, restart: RestartPoint
) -> list[str]:
    """Why ``server`` is not the recorded source (empty: it is, or nothing is recorded and the
    relay log is empty)."""
    problems: list[str] = []
    if recorded is None:
        if not restart.empty:
            problems.append("source.state is missing but the relay log holds a position")
    elif recorded.flavor != server.flavor.value:
        problems.append(
            f"the server is {server.flavor.value}, the relay log holds {recorded.flavor}"
        )
    elif server.flavor is Flavor.MYSQL and recorded.server_uuid != server.server_uuid:
        problems.append(f"server_uuid is {server.server_uuid}, was {recorded.server_uuid}")
    elif server.flavor is Flavor.MARIADB and recorded.server_id != server.server_id:
        problems.append(f"server_id is {server.server_id}, was {recorded.server_id}")
    state = _server_state(server)
    if state is None:
        return [*problems, f"its GTID state {server.gtid_binlog_pos!r} cannot be read"]
    if recorded is not None and recorded.flavor == server.flavor.value:
        seen = _parse(recorded.gtid_state_at_record, server.flavor)
        if seen is not None and not _contains(state, seen):
            problems.append(
                f"its GTID history ({state.text() or 'empty'}) lacks what it had when "
                f"recorded ({seen.text()}): it was reset or replaced"
            )
    ours = restart.gtid_state
    if ours is not None and restart.flavor is server.flavor and not _contains(state, ours):
        problems.append(
            f"its GTID history ({state.text() or 'empty'}) does not contain our position "
            f"({ours.text()})"
        )
    return problems


def _server_state(server: ServerInfo) -> GtidState | None:
    return _parse(server.gtid_binlog_pos or "", server.flavor)


def _parse(text: str, flavor: Flavor) -> GtidState | None:
    try:
        return parse_server_gtid_state(text, mariadb=flavor is Flavor.MARIADB)
    except ValueError:
        return None


def _contains(state: GtidState, other: GtidState) -> bool:
    return type(state) is type(other) and state.contains(other)  # type: ignore[arg-type]


def identity_changed_error(
    recorded: SourceIdentity | None, server: ServerInfo, address: str, problems: list[str]
) -> SourceIdentityChangedError:
    found = SourceIdentity.of_server(server, ReplicationMode.GTID, address).describe()
    expected = recorded.describe() if recorded is not None else "(no record)"
    return SourceIdentityChangedError(
        f"the source at {address} is not the server this state folder replicates from: "
        + "; ".join(problems),
        hint="if [source] points at the intended server (a failover target holding the same "
        "history, or a restored copy), run again with --accept-new-source to record it; "
        "otherwise fix [source] host/port",
        expected=expected,
        found=found,
    )


class SourceStateFile:
    """``source.state``: one ``SourceIdentity`` in a shadow-page file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> SourceIdentity | None:
        """The committed identity (None when the file does not exist). A prepare that a crash
        left unresolved is rolled back: the identity it carried is checked and recorded again."""
        if not self.path.exists():
            return None
        state = ShadowStateFile.open(self.path)
        try:
            xid = state.recover()
            if xid is not None:
                state.rollback(xid)
            raw = state.read()
        finally:
            state.close()
        return SourceIdentity.decode(raw, self.path) if raw else None

    def record(self, identity: SourceIdentity) -> None:
        """Make ``identity`` the committed one (create, or prepare + commit)."""
        data = identity.encode()
        if not self.path.exists():
            ShadowStateFile.create(self.path, initial=data).close()
        else:
            state = ShadowStateFile.open(self.path)
            try:
                xid = state.sequence + 1
                state.prepare(xid, data)
                state.commit(xid)
            finally:
                state.close()
        crash_point("receiver_identity_recorded")


def with_mode(identity: SourceIdentity, mode: ReplicationMode) -> SourceIdentity:
    return replace(identity, mode=mode.value)
