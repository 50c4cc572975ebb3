"""binlake's one error tree: import any of its errors from here.

The root and the format errors live in ``binlake.binlog.errors`` (pure code raises them without
depending on anything outside its package); they are re-exported here (``X as X``) with the
errors of the outer layers. The exit code the CLI gives an error (``exit_code``) and whether
waiting may cure it (``retryable``) are class attributes the root declares (70, False); a class
whose branch differs declares its own, and its subclasses inherit it by attribute lookup.
"""

from __future__ import annotations

from typing import ClassVar

from binlake.binlog.errors import BinlakeError as BinlakeError
from binlake.binlog.errors import BinlogFormatError as BinlogFormatError
from binlake.binlog.errors import ChecksumMismatchError as ChecksumMismatchError
from binlake.binlog.errors import InvalidEventError as InvalidEventError
from binlake.binlog.errors import NotABinlogError as NotABinlogError
from binlake.binlog.errors import OrphanEventError as OrphanEventError
from binlake.binlog.errors import TruncatedEventError as TruncatedEventError
from binlake.binlog.errors import UnsupportedTypeError as UnsupportedTypeError
from binlake.binlog.errors import ValueDecodeError as ValueDecodeError


class UsageError(BinlakeError):
    """The command line asks for something impossible."""

    exit_code = 64
    default_hint = "run the command with --help"


class ConfigError(BinlakeError):
    """A configuration file or value is missing or invalid; ``field`` names it."""

    exit_code = 78
    default_hint = "fix the named field in the config file"

    field: str | None = None


class StorageError(BinlakeError):
    """A file binlake owns or was given cannot be read or written as needed."""

    exit_code = 74


class FileAccessError(StorageError):
    """A file or folder cannot be opened, read or written (missing, permissions, disk full)."""

    default_hint = "check that the path exists and is readable (and writable where needed)"


class DiskFullError(StorageError):
    """A write failed because the disk (or quota) is full; nothing written before it is lost."""

    default_hint = "free space on the named file's disk, then run the same command again"


class NoIndexError(StorageError):
    """A folder was given where a binlog index file was expected, and it has none."""

    default_hint = "pass the binlog files themselves, or the folder that holds their .index file"


class IndexFileError(StorageError):
    """An index file is malformed or names files that do not exist."""

    default_hint = "`binlake binlog recover DIR` repairs an index left by a crash"


class RelayLogStateError(StorageError):
    """The relay log writer was asked for what its state forbids (closed, failed, mid-group)."""

    default_hint = (
        "open a new writer (RelayLogWriter.open runs recovery first); rotate only between "
        "transactions"
    )


class LogCorruptionError(BinlogFormatError):
    """A log file is damaged before its tail (or an older file is damaged): not a torn write."""

    default_hint = (
        "a crash only tears the tail of the newest file; restore the named file from a copy "
        "or re-fetch it from the source, then run `binlake binlog recover DIR` again"
    )


class DuplicateTransactionError(BinlogFormatError):
    """The same GTID appears twice in one log: applying both would double a transaction."""

    default_hint = (
        "a log was spliced or re-fetched without trimming; remove the duplicated file or "
        "re-fetch the log from the source"
    )


class StateFileError(StorageError):
    """A shadow-page state file cannot be used as asked (closed, read-only, failed, exists)."""

    default_hint = "check the state folder; `ShadowStateFile.open` re-reads a state file"


class NotAStateFileError(StateFileError):
    """The file is not a binlake state file: wrong magic, version or size."""

    default_hint = (
        "check the path: a state file starts with the bytes BLKSHADW and is 4096 + 2 * page size "
        "bytes long; binlake never overwrites a file it did not create"
    )


class StateFileCorruptError(StateFileError):
    """A state file's committed state cannot be read exactly (damage a crash cannot cause)."""

    default_hint = (
        "restore the state file from a backup; binlake never falls back to older state silently"
    )


class StatePayloadTooLargeError(StateFileError):
    """A payload is larger than a page of the state file; ``size`` and ``capacity`` in bytes."""

    default_hint = "create the state file with a larger page size"

    size: int | None = None
    capacity: int | None = None


class XidMismatchError(StateFileError):
    """prepare/commit/rollback out of protocol: ``xid`` asked, ``prepared_xid`` pending or None."""

    default_hint = (
        "resolve the XID recover() reports (commit or rollback) before preparing another; "
        "commit or roll back only that XID"
    )

    xid: int | None = None
    prepared_xid: int | None = None


class CheckpointError(StorageError):
    """The relay-log checkpoint bookkeeping was told something impossible (a caller's bug or a
    relay index that lost the checkpoint file)."""

    default_hint = (
        "the relay log and its checkpoint disagree; run recovery, which rebuilds the counts "
        "from the recorded checkpoint"
    )


class CheckpointRecordError(CheckpointError):
    """The recorded checkpoint file is malformed or fails its CRC32."""

    default_hint = (
        "delete the named checkpoint file: recovery then scans every relay file from the first "
        "(safe, only slower)"
    )


class SnapshotPlanError(StorageError):
    """The snapshot plan or a snapshot request file in the state folder is not valid."""

    default_hint = (
        "the plan is written atomically, so this is damage from outside binlake: remove the "
        "named file and run binlake snapshot --tables for the tables still to copy"
    )


class KeyIndexError(StorageError):
    """A key index (``<state dir>/keyindex/``: the positions of a table's keys) cannot serve;
    ``reason`` says why in a word or two (the metric's label)."""

    default_hint = (
        "binlake rebuilds a key index from its table; if this repeats, remove the named file"
    )

    reason: str | None = None


class KeyIndexUntrustedError(KeyIndexError):
    """A key index is missing, damaged, of another table or behind the table in a way it cannot
    follow: it is not used as true, it is rebuilt from the table (this error is the warning)."""

    default_hint = (
        "nothing to do: binlake rebuilds the index from the table (one read of the whole table)"
    )


class KeyIndexVersionError(KeyIndexError):
    """A key index file was written by a newer binlake (a format version this one does not
    know): it is left as it is."""

    default_hint = (
        "run the binlake that wrote it, or remove the named file: binlake then rebuilds it from "
        "the table"
    )

    version: int | None = None


class KeyIndexDuplicateKeyError(KeyIndexError):
    """The lake table holds two live rows of one key: no index can say which one a change
    replaces."""

    default_hint = (
        "the table no longer equals its source: run binlake verify, then re-snapshot the table "
        "(binlake snapshot --tables)"
    )


class StateLockedError(StorageError):
    """Another process holds the state folder's lock; ``holder_*`` name it (None if unreadable)."""

    exit_code = 75
    default_hint = (
        "stop the other binlake process first; if it has died the lock is already free and a "
        "retry succeeds (never delete the lock file)"
    )

    holder_pid: int | None = None
    holder_hostname: str | None = None
    holder_started: str | None = None
    holder_command: str | None = None


class SourceError(BinlakeError):
    """The MySQL/MariaDB source refused or failed a request; ``code`` is the server's error
    number when it sent one. ``retryable``: reconnecting later may succeed."""

    exit_code = 69
    default_hint = "see the source server's message above"

    code: int | None = None
    host: str | None = None
    port: int | None = None


class SourceUnreachableError(SourceError):
    """No connection to the source: refused, unknown host, timeout, TLS failure."""

    retryable = True
    default_hint = (
        "check [source] host and port, that the server runs and listens on that interface, "
        "and firewalls between; binlake retries with backoff once the state folder has "
        "streamed from the source"
    )


class SourceAuthError(SourceError):
    """The source rejected the login or lacks a privilege binlake needs (``user`` named)."""

    exit_code = 77
    default_hint = (
        "check [source] user and its password (password_env / password_file), and that the "
        "user may connect from this host; `binlake check-source --config F` lists the grants "
        "binlake needs"
    )

    user: str | None = None


class SourceConfigError(SourceError):
    """The source server is configured so binlake cannot replicate from it (binlog off, wrong
    format, no checksums, ...); ``setting`` names the variable."""

    exit_code = 78
    default_hint = "run `binlake check-source --config F`: it prints the exact fix for each setting"

    setting: str | None = None


class SourcePositionLostError(SourceError):
    """The source cannot serve the requested position (error 1236: binlog purged, position or
    GTID not in its binlogs). ``requested`` is the position binlake asked for."""

    exit_code = 66
    default_hint = (
        "the source no longer has the binlog binlake needs: re-snapshot the affected tables "
        "with `binlake snapshot --tables ...`; binlake never skips ahead"
    )

    requested: str | None = None


class SourceConnectionLostError(SourceError):
    """An established connection ended: EOF, reset, or silence past twice the heartbeat period
    (``timed_out``). No partial event is ever passed on."""

    retryable = True
    default_hint = (
        "the network or the source went away; binlake reconnects with backoff and resumes "
        "from the last complete transaction"
    )

    timed_out: bool = False


class SourceProtocolError(SourceError):
    """The source sent bytes that break the protocol (sequence id, framing, impossible event
    length): the connection is dropped and a new one may be tried."""

    exit_code = 76
    retryable = True
    default_hint = (
        "something between binlake and the source mangles the stream (a proxy?); binlake "
        "reconnects, and reports it again if it persists"
    )


class SourceIdentityChangedError(SourceError):
    """The server behind [source] is not the one binlake replicated from (server_uuid, or a
    GTID history that does not contain our position); ``expected`` and ``found`` name both."""

    exit_code = 65
    default_hint = (
        "[source] now points at a different server; if that is intended (failover to a replica "
        "with the same history), confirm it explicitly, else fix the host in the config"
    )

    expected: str | None = None
    found: str | None = None


class SparkError(BinlakeError):
    """Spark or Iceberg could not do what the applier asked."""

    default_hint = "see the Spark message above; `BINLAKE_DEBUG=1` shows the Java stack trace"


class SparkSetupError(SparkError):
    """Spark cannot start or lacks a piece: Java, the Iceberg runtime jar, its shaded Jackson
    classes, py4j's pinned threads. ``component`` names the missing piece."""

    exit_code = 69
    default_hint = "run `make spark-deps` (Java, the repaired Iceberg runtime), then retry"

    component: str | None = None


class SparkStatementError(SparkError):
    """A Spark SQL statement or DataFrame write failed; ``statement`` is its text (shortened).
    Whether the table changed is told by its newest snapshot, never assumed."""

    default_hint = (
        "the target table's newest binlake snapshot says what it holds; a restart re-applies "
        "from there"
    )

    statement: str | None = None


class SparkMasterError(SparkError):
    """The Spark master cannot be used as configured (``[spark] master`` malformed, or not a
    master); ``master`` is the URL."""

    exit_code = 78
    default_hint = (
        "set [spark] master to spark://HOST:PORT of a running standalone master (several "
        "masters: spark://H1:P1,H2:P2), or local[N] for Spark inside binlake"
    )

    master: str | None = None


class SparkMasterUnreachableError(SparkMasterError):
    """Nothing accepts connections at the master's address, or the master never accepted the
    application (Spark gives up after three 20 s registration attempts)."""

    exit_code = 69
    retryable = True
    default_hint = (
        "start the master, or fix [spark] master (its log names the address it listens on); "
        "check that this host reaches it (firewall, DNS)"
    )


class SparkNoExecutorsError(SparkError):
    """The application registered with the master but got no executor: no worker has the
    free cores or memory it asks for. ``app_state``, ``free_cores`` are the master's view."""

    exit_code = 69
    default_hint = (
        "free cores on the cluster (another application holds them), or lower "
        "spark.cores.max / spark.executor.cores / spark.executor.memory in [spark.conf] to "
        "what one worker offers (the master's UI lists them)"
    )

    master: str | None = None
    waited_s: float | None = None
    app_state: str | None = None
    free_cores: int | None = None


class TargetError(BinlakeError):
    """The lake target cannot be written as configured: a namespace binlake may not create
    or write, a warehouse without space. ``check`` names the check that failed."""

    exit_code = 73
    default_hint = "run `binlake check-target --config F`: it prints the fix for each problem"

    check: str | None = None


#: A delete ``file`` a batch merges or a key index catch-up reads is missing or damaged (``check``).
class DeletionVectorError(TargetError):
    default_hint = "restore the file from a backup, or roll the table back to before it was added"


class CatalogError(BinlakeError):
    """The Iceberg catalog refused or failed a request. ``catalog`` is the Spark catalog name,
    ``uri`` its address (any password in it masked)."""

    default_hint = "check the [catalog] section (or the spark.sql.catalog.* keys in [spark.conf])"

    catalog: str | None = None
    uri: str | None = None


class CatalogUnreachableError(CatalogError):
    """No connection to the catalog (its database is down, refuses, times out, or ended the
    connection). Nothing was committed by the statement that failed, or, during a commit, the
    table's position tells whether it was: binlake re-reads it before applying again."""

    exit_code = 69
    retryable = True
    default_hint = (
        "check that the catalog's database runs and that [catalog] uri names its host and "
        "port; a running `binlake replicate` retries with backoff, then stops (nothing lost)"
    )


class CatalogAuthError(CatalogError):
    """The catalog's database refused the login (user or password)."""

    exit_code = 77
    default_hint = (
        "check [catalog] user and its password (password_env / password_file) against the "
        "catalog database's accounts"
    )


class CatalogConfigError(CatalogError):
    """The catalog settings cannot work: the database in the uri does not exist, no JDBC
    driver on spark.jars for the uri."""

    exit_code = 78


class CatalogCommitUnknownError(CatalogError):
    """The catalog lost the connection during a commit: whether the commit landed is unknown
    until the table is read again. binlake never assumes either way."""

    exit_code = 75
    retryable = True
    default_hint = (
        "run binlake again: it reads each table's newest binlake snapshot and applies only "
        "what the table does not hold, whichever way the commit went"
    )


class CommitConflictError(SparkStatementError):
    """Another writer committed to the table first (Iceberg's optimistic concurrency:
    ``CommitFailedException``, or a ``ValidationException`` naming conflicting files): the
    failed commit changed nothing. ``reason`` is Iceberg's message; ``attempts`` how many
    commits were tried when binlake gave up (``[applier] commit_retries``)."""

    retryable = True
    default_hint = (
        "another writer (a maintenance job, an ALTER, a DELETE) committed to the table first; "
        "binlake re-plans and commits again, [applier] commit_retries times"
    )

    reason: str | None = None
    attempts: int | None = None


class SchemaEvolutionError(BinlakeError):
    """The applier cannot follow a source table's DDL; ``statement`` is the DDL text, ``column``
    the column at fault (where one is). The hint names the options: exclude the table, or
    re-snapshot it."""

    default_hint = (
        "exclude the table in [tables] exclude, or re-snapshot it with "
        "`binlake snapshot --tables db.table`"
    )
    #: The hint when the table is known (``{table}``: its name); a subclass may set its own.
    table_hint: ClassVar[str] = (
        'exclude the table in [tables] exclude ("{table}"), or re-snapshot it with '
        "`binlake snapshot --tables {table}`"
    )

    statement: str | None = None
    column: str | None = None

    def _default_hint(self) -> str:
        if self.table is None:
            return self.default_hint
        return self.table_hint.format(table=self.table)


class UnsupportedDdlError(SchemaEvolutionError):
    """A DDL statement on a replicated table that binlake cannot parse or follow (an ALTER
    clause it does not know, a partition operation that changes rows without row events)."""


class UnsupportedDefaultError(SchemaEvolutionError):
    """An ALTER TABLE gave the rows a table already has a value binlake cannot reproduce
    exactly (an expression default, a generated or AUTO_INCREMENT column, a time the event
    does not carry). ``column`` names the column; ``statement`` the DDL."""

    table_hint = (
        "re-snapshot the table (`binlake snapshot --tables {table}`), or exclude it "
        'in [tables] exclude ("{table}"); the rows it had before the ALTER are not '
        "in the binlog"
    )


class IncompatibleSchemaChangeError(SchemaEvolutionError):
    """A source schema change the Iceberg table cannot follow without rewriting its data:
    narrowing, a change of kind (int to string), a decimal scale change, a primary key change
    Iceberg cannot express. ``column``, ``old_type`` and ``new_type`` say what."""

    old_type: str | None = None
    new_type: str | None = None


class StatementFormatError(SourceConfigError):
    """The relay log holds a statement-format change to a replicated table (a QUERY with DML,
    or a transaction whose rows events are missing): binlake applies row images only."""

    default_hint = (
        "set binlog_format=ROW on the source (SET GLOBAL binlog_format = 'ROW' and in its "
        "config file), then re-snapshot the named table; binlake never guesses rows from SQL"
    )

    setting = "binlog_format"


class RowImageError(SourceConfigError):
    """A row image lacks a column binlake cannot get anywhere else (an insert logged with
    binlog_row_image=MINIMAL leaves out the columns it did not set)."""

    default_hint = (
        "set binlog_row_image=FULL (or NOBLOB) on the source, then re-snapshot the named table"
    )

    setting = "binlog_row_image"


class ApplyError(BinlakeError):
    """The applier met something in the relay log it cannot apply exactly (an XA transaction
    touching a replicated table, a rows event without its TABLE_MAP)."""

    default_hint = (
        "exclude the named table in [tables] exclude, or re-snapshot it; binlake never skips "
        "a change silently"
    )


class SnapshotError(BinlakeError):
    """A table cannot be snapshot as asked (not on the source, not selected, no usable key)."""

    default_hint = "check the table names against the source and [tables] include/exclude"


class SnapshotShapeChangedError(SnapshotError):
    """A table was altered while it was copied: its copy starts over with the new shape (it is
    raised to the user only when that keeps happening)."""

    default_hint = "run the snapshot again once the table's DDL has settled"


class CutError(BinlakeError):
    """A consistent cut cannot be given as asked (docs/spark.md, "Reading at a cut")."""

    exit_code = 66
    default_hint = "run binlake cut --config F to list what the cuts table holds"

    #: The ``--at`` asked for (latest, a GTID set, file:offset or a time).
    at: str | None = None


class CutNotFoundError(CutError):
    """No retained cut is at or before the point asked for (none recorded yet, or the point is
    before the oldest retained cut)."""

    default_hint = (
        "ask for a point at or after the oldest retained cut ([cuts] keep_last, keep_every_s "
        "and keep_for_s say which are kept), or let binlake replicate record one"
    )

    oldest: str | None = None


class CutTableError(CutError):
    """A table asked for is not in the cut: unknown, added after the cut, or still being
    copied at it."""

    default_hint = "read a later cut, or leave the table out"
