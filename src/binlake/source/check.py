"""``check_source``: is this server, and this user on it, ready for binlake?

Server settings: binary logging on, ROW format, FULL row image, FULL row metadata, CRC32
checksums, a server_id that is neither 0 nor binlake's own. User privileges: REPLICATION SLAVE
(the dump itself), REPLICATION CLIENT -- called BINLOG MONITOR from MariaDB 10.5 on -- (SHOW
BINARY LOGS, the binlog positions) and SELECT (the snapshots that seed each table).

Privileges are read from ``SHOW GRANTS`` (the current user's grants plus those of its active
role), so grants through a role that is not active in a new session are not seen: grant them to
the user, or set the role as its default role.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from binlake.binlog.format import Flavor
from binlake.source.client import ServerInfo, SourceConnection
from binlake.source.settings import ConnectionSettings

#: (variable, the value binlake needs) in the order problems are reported.
REQUIRED_SETTINGS = (
    ("binlog_format", "ROW"),
    ("binlog_row_image", "FULL"),
    ("binlog_row_metadata", "FULL"),
    ("binlog_checksum", "CRC32"),
)
#: Privilege names as SHOW GRANTS prints them; the first is the one to grant.
REPLICATION_SLAVE_NAMES = ("REPLICATION SLAVE", "REPLICATION REPLICA")
REPLICATION_CLIENT_NAMES = ("BINLOG MONITOR", "REPLICATION CLIENT")

_GRANT = re.compile(r"^GRANT\s+(?P<privs>.+?)\s+ON\s+(?P<target>\S+)\s+TO\s", re.IGNORECASE)
_PARENS = re.compile(r"\([^)]*\)")


@dataclass(frozen=True)
class SourceProblem:
    """One thing to fix on the source: what was ``found``, what binlake ``expected``, and the
    exact ``fix`` (SQL statements and/or my.cnf lines)."""

    setting: str
    found: str
    expected: str
    fix: str

    def __str__(self) -> str:
        return f"{self.setting}: found {self.found}, binlake needs {self.expected}"


def check_source(settings: ConnectionSettings, *, gtid_mode: bool = False) -> list[SourceProblem]:
    """Log in with ``settings`` and list every problem; [] when the source is ready.

    Connection failures (unreachable, bad login) raise their typed errors instead.
    ``gtid_mode``: binlake will resume by GTID (MySQL then needs gtid_mode=ON).
    """
    with SourceConnection.open(settings) as connection:
        grants = [str(row[0]) for row in connection.query("SHOW GRANTS")]
        ((account,),) = connection.query("SELECT CURRENT_USER()")
        server = connection.server
    problems = setting_problems(server, settings.server_id, gtid_mode=gtid_mode)
    problems += privilege_problems(grants, server, grantee_of(str(account)))
    return problems


def grantee_of(account: str) -> str:
    """``'user'@'host'`` for GRANT, from CURRENT_USER()'s ``user@host``."""
    user, _, host = account.rpartition("@")
    return f"'{user}'@'{host}'"


# ---- server settings -------------------------------------------------------------------------


def _cnf_fix(name: str, value: str, *, dynamic: bool = True) -> str:
    line = f"under [mysqld] in my.cnf: {name} = {value}"
    if not dynamic:
        return f"{line}, then restart the server ({name} cannot be changed at runtime)"
    return (
        f"SET GLOBAL {name} = '{value}';  and {line}  "
        "(SET GLOBAL applies to new sessions; the my.cnf line keeps it after a restart)"
    )


def setting_problems(
    server: ServerInfo, our_server_id: int, *, gtid_mode: bool = False
) -> list[SourceProblem]:
    """The server variables that are not what binlake needs, each with its fix."""
    problems: list[SourceProblem] = []
    variables = server.variables
    if not server.log_bin:
        basename = "mariadb-bin" if server.flavor is Flavor.MARIADB else "mysql-bin"
        problems.append(
            SourceProblem(
                "log_bin",
                variables.get("log_bin", "(missing)"),
                "ON",
                _cnf_fix("log_bin", basename, dynamic=False),
            )
        )
    for name, expected in REQUIRED_SETTINGS:
        found = variables.get(name)
        if found is None:
            problems.append(_missing_variable(name, expected, server))
        elif found.upper() != expected:
            problems.append(SourceProblem(name, found, expected, _cnf_fix(name, expected)))
    problems += _server_id_problems(server.server_id, our_server_id)
    if gtid_mode and server.flavor is Flavor.MYSQL and variables.get("gtid_mode") != "ON":
        problems.append(
            SourceProblem(
                "gtid_mode",
                variables.get("gtid_mode", "(missing)"),
                "ON (binlake resumes by GTID)",
                "step gtid_mode up one value at a time: SET GLOBAL enforce_gtid_consistency = ON; "
                "SET GLOBAL gtid_mode = OFF_PERMISSIVE; SET GLOBAL gtid_mode = ON_PERMISSIVE; "
                "SET GLOBAL gtid_mode = ON;  and under [mysqld] in my.cnf: gtid_mode = ON, "
                'enforce_gtid_consistency = ON  (or set mode = "file" in binlake\'s [source])',
            )
        )
    return problems


def _missing_variable(name: str, expected: str, server: ServerInfo) -> SourceProblem:
    needs = "MariaDB 10.5 or MySQL 8.0.1" if name == "binlog_row_metadata" else "a newer server"
    return SourceProblem(
        name,
        f"(no such variable on {server.version})",
        expected,
        f"upgrade the server to at least {needs}, then set {name} = {expected} under "
        "[mysqld] in my.cnf",
    )


def _server_id_problems(server_id: int, ours: int) -> list[SourceProblem]:
    if server_id == 0:
        return [
            SourceProblem(
                "server_id",
                "0",
                "a non-zero id unique in the topology",
                "SET GLOBAL server_id = 1;  and under [mysqld] in my.cnf: server_id = 1  "
                "(any id not used by another server or replica)",
            )
        ]
    if server_id == ours:
        other = ours + 1 if ours < 0xFFFFFFFF else ours - 1
        return [
            SourceProblem(
                "server_id",
                f"{server_id}, the same as binlake's [source] server_id",
                "binlake's server_id to differ from the source's",
                f"set server_id = {other} (any id no server or replica uses) in the [source] "
                "section of binlake's config",
            )
        ]
    return []


# ---- privileges ------------------------------------------------------------------------------


def parse_grants(lines: list[str]) -> dict[str, set[str]]:
    """``{target: {PRIVILEGE, ...}}`` from SHOW GRANTS lines (``*.*``, ```db`.*``, ...)."""
    out: dict[str, set[str]] = {}
    for line in lines:
        match = _GRANT.match(line.strip())
        if match is None or match.group("privs").upper().startswith("PROXY"):
            continue
        privs = _PARENS.sub("", match.group("privs"))
        names = {" ".join(p.split()).upper() for p in privs.split(",") if p.strip()}
        out.setdefault(match.group("target").replace("`", ""), set()).update(names)
    return out


def privilege_problems(
    grant_lines: list[str], server: ServerInfo, grantee: str
) -> list[SourceProblem]:
    """The privileges ``grantee`` (``'user'@'host'``) lacks, each with the GRANT that fixes it."""
    grants = parse_grants(grant_lines)
    global_privs = grants.get("*.*", set())
    has_all = "ALL PRIVILEGES" in global_privs or "ALL" in global_privs
    problems: list[SourceProblem] = []
    needed = (
        (REPLICATION_SLAVE_NAMES, "stream the binlog (COM_BINLOG_DUMP)"),
        (_client_names(server), "list binlogs and positions (SHOW BINARY LOGS)"),
    )
    for names, purpose in needed:
        if not has_all and not global_privs.intersection(names):
            problems.append(
                SourceProblem(
                    f"privilege {names[0]}",
                    "not granted",
                    f"{names[0]} ON *.* to {purpose}",
                    f"GRANT {names[0]} ON *.* TO {grantee};",
                )
            )
    if not has_all and not any("SELECT" in p or "ALL PRIVILEGES" in p for p in grants.values()):
        problems.append(
            SourceProblem(
                "privilege SELECT",
                "not granted on any database",
                "SELECT on the replicated tables, to snapshot them",
                f"GRANT SELECT ON `your_db`.* TO {grantee};  (one per replicated database)",
            )
        )
    return problems


def _client_names(server: ServerInfo) -> tuple[str, ...]:
    """MariaDB 10.5+ shows REPLICATION CLIENT as BINLOG MONITOR; grant the name it knows."""
    if server.flavor is Flavor.MARIADB and _version_tuple(server.version) >= (10, 5):
        return REPLICATION_CLIENT_NAMES
    return REPLICATION_CLIENT_NAMES[::-1]


def _version_tuple(version: str) -> tuple[int, ...]:
    head = re.match(r"(\d+)\.(\d+)", version)
    return (int(head.group(1)), int(head.group(2))) if head else (0, 0)
