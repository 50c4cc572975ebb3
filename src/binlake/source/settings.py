"""How to reach the source: ``ConnectionSettings``, made from the ``[source]`` config section.

Kept apart from the client (``binlake.source.client``) so that the error mapping
(``binlake.source.errmap``) and other readers of the source can name them without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pymysql

from binlake.config import SourceConfig


@dataclass(frozen=True)
class ConnectionSettings:
    """How to reach the source; ``server_id`` is ours, for COM_REGISTER_SLAVE (unique among the
    source's replicas). TLS is used when ``ssl_ca``, ``ssl_cert`` or ``ssl_key`` is set.

    ``password`` is the bytes sent to the server (every auth plugin hashes bytes); text given
    here is taken as its UTF-8 bytes. PyMySQL would encode a ``str`` as latin-1, which is not
    what a utf8mb4 client hashed for ``IDENTIFIED BY 'pässwörd'``."""

    host: str
    port: int
    user: str
    password: bytes = field(repr=False)
    server_id: int
    connect_timeout_s: float = 10.0
    #: ``@master_heartbeat_period``: the source sends a heartbeat after this long idle; a peer
    #: silent for twice as long is dead.
    heartbeat_period_s: float = 5.0
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_verify: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.password, str):
            object.__setattr__(self, "password", self.password.encode("utf-8"))
        if not 0 < self.port < 65536:
            raise ValueError(f"port {self.port} is not a TCP port")
        if not 0 < self.server_id <= 0xFFFFFFFF:
            raise ValueError(f"server_id {self.server_id} must be in 1..4294967295")
        if self.connect_timeout_s <= 0 or self.heartbeat_period_s <= 0:
            raise ValueError("connect_timeout_s and heartbeat_period_s must be positive")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def uses_tls(self) -> bool:
        return any(x is not None for x in (self.ssl_ca, self.ssl_cert, self.ssl_key))

    @property
    def read_timeout_s(self) -> float:
        """No byte for this long during a dump means the connection is dead."""
        return 2 * self.heartbeat_period_s


def connection_settings(source: SourceConfig) -> ConnectionSettings:
    """The settings ``[source]`` gives (the password revealed only here)."""
    return ConnectionSettings(
        host=source.host,
        port=source.port,
        user=source.user,
        password=source.password.reveal() if source.password is not None else b"",
        server_id=source.server_id,
        connect_timeout_s=source.connect_timeout_s,
        heartbeat_period_s=source.heartbeat_period_s,
        ssl_ca=str(source.ssl_ca) if source.ssl_ca is not None else None,
        ssl_cert=str(source.ssl_cert) if source.ssl_cert is not None else None,
        ssl_key=str(source.ssl_key) if source.ssl_key is not None else None,
        ssl_verify=source.ssl_verify,
    )


def connect_args(settings: ConnectionSettings) -> dict[str, Any]:
    """PyMySQL's ``connect`` arguments for ``settings``."""
    args: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "user": settings.user,
        "password": settings.password,  # bytes: sent as they are, on every connection
        # PyMySQL waits for the server's greeting with read_timeout: bound the whole login
        # by connect_timeout_s (a port that accepts but never greets must not hang for long).
        "connect_timeout": settings.connect_timeout_s,
        "read_timeout": settings.connect_timeout_s,
        "write_timeout": settings.connect_timeout_s,
        "charset": "utf8mb4",
        "autocommit": True,
        "program_name": "binlake",
    }
    if settings.uses_tls:
        args.update(
            ssl_ca=settings.ssl_ca,
            ssl_cert=settings.ssl_cert,
            ssl_key=settings.ssl_key,
            ssl_verify_cert=settings.ssl_verify,
            ssl_verify_identity=settings.ssl_verify,
        )
    return args


def open_connection(settings: ConnectionSettings) -> pymysql.connections.Connection[Any]:
    """A PyMySQL connection for ``settings`` (``connect_args``); PyMySQL's own errors pass."""
    return _Connection(**connect_args(settings))


if TYPE_CHECKING:
    _PyMySQLConnection = pymysql.connections.Connection[Any]
else:
    _PyMySQLConnection = pymysql.connections.Connection


class _Connection(_PyMySQLConnection):
    """PyMySQL's connection, with one change: without TLS settings PyMySQL still prepares TLS
    (its "preferred" mode: used if the server offers it, certificates not checked) and builds a
    fresh ``ssl.create_default_context()`` for that at every connect, which loads the system's
    CA store (0.1-0.2 s, measured by profiling `binlake receive`). That context holds no
    per-connection state, so it is built once per process and shared."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        build = getattr(super(), "_create_ssl_ctx")  # noqa: B009 (private: not in the stubs)
        if sslp:
            return build(sslp)
        global _preferred_tls
        if _preferred_tls is None:
            _preferred_tls = build(sslp)
        return _preferred_tls


_preferred_tls: Any = None
