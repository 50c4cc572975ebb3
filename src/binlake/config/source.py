"""``[source]``: the MariaDB/MySQL primary and how to reach it (docs/configuration.md).

Its password is never in the file: ``password_env`` or ``password_file`` says where it is
(``binlake.config.secrets``); TLS is on once one ``ssl_*`` file is set, and the files must exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

from binlake.config.secrets import Secret, read_password
from binlake.config.section import Loading, Section, setting
from binlake.config.values import (
    bool_value,
    enum_value,
    float_value,
    int_value,
    path_value,
    str_value,
)
from binlake.errors import ConfigError

__all__ = ["ReplicationMode", "SourceConfig"]

MAX_SERVER_ID = (1 << 32) - 1
#: The largest heartbeat period MariaDB and MySQL accept (seconds).
MAX_HEARTBEAT_S = 4_294_967.0
_TLS_KEYS = ("ssl_ca", "ssl_cert", "ssl_key")


class ReplicationMode(StrEnum):
    """How the receiver asks the source where to resume: by GTID state or by file and offset."""

    GTID = "gtid"
    FILE = "file"


@dataclass(frozen=True, kw_only=True)
class SourceConfig(Section):
    """``[source]``: the MariaDB/MySQL primary and how to reach it."""

    host: str = setting("str", str_value(), doc="host name or address of the primary")
    port: int = setting("int", int_value(1, 65535), 3306, "TCP port")
    user: str = setting(
        "str", str_value(), doc="replication user (REPLICATION SLAVE, REPLICATION CLIENT)"
    )
    #: The environment variable or the file the password is read from (snapshot chunk tasks
    #: read it again on the executors: the password itself never travels to them).
    password_env: str | None = setting(
        "str", str_value(), None, "name of the environment variable with the password"
    )
    password_file: Path | None = setting(
        "path",
        path_value,
        None,
        "file holding the password (its bytes, one trailing newline dropped)",
    )
    server_id: int = setting(
        "int",
        int_value(1, MAX_SERVER_ID),
        doc="binlake's server id on the primary: unique among its replicas",
    )
    mode: ReplicationMode = setting(
        "gtid or file",
        enum_value(ReplicationMode),
        ReplicationMode.GTID,
        "resume by GTID state (gtid) or by binlog file and offset (file)",
    )
    heartbeat_period_s: float = setting(
        "float",
        float_value(0.0, MAX_HEARTBEAT_S),
        5.0,
        "the primary sends a heartbeat after this much silence; 2x without any is a dead link",
    )
    connect_timeout_s: float = setting(
        "float", float_value(0.0, 3600.0), 10.0, "TCP connect and login timeout"
    )
    ssl_ca: Path | None = setting(
        "path", path_value, None, "CA certificate file; setting any ssl_* key enables TLS"
    )
    ssl_cert: Path | None = setting("path", path_value, None, "client certificate file")
    ssl_key: Path | None = setting("path", path_value, None, "client private key file")
    ssl_verify: bool = setting(
        "bool", bool_value, True, "verify the server certificate and host name"
    )
    #: Where the password came from, for messages: "environment variable X", "file F", "none".
    password_origin: str
    password: Secret | None = field(default=None, repr=False)

    @classmethod
    def from_values(cls, values: dict[str, Any], loading: Loading) -> Self:
        """Reads the password; the TLS files must be there, a certificate with its key."""
        password, origin = read_password(
            "source", values["password_env"], values["password_file"], loading.env
        )
        if (values["ssl_cert"] is None) != (values["ssl_key"] is None):
            missing = "ssl_key" if values["ssl_key"] is None else "ssl_cert"
            raise ConfigError(
                "[source] ssl_cert and ssl_key go together",
                field=f"source.{missing}",
                hint="set both the client certificate and its key, or neither",
            )
        for key in _TLS_KEYS:
            path: Path | None = values[key]
            if path is not None and not path.is_file():
                raise ConfigError(f"[source] {key}: {path} is not a file", field=f"source.{key}")
        return cls(**values, password_origin=origin, password=password)
