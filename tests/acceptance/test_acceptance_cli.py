"""Acceptance scenarios 11 and 12 (shared/design.md), through the whole pipeline (real MariaDB,
Spark, Iceberg):

11. a second `binlake replicate` on the state folder of a running one refuses (exit 75), naming
    the first; the first goes on unharmed;
12. corrupt, truncated and foreign files in a real state folder (one a replicate run left) and
    as the config file: `binlake replicate` (and, for the config, every command that takes one)
    stops with a typed error, a hint, a non-zero exit code and no traceback, and leaves every
    file as it was. (`binlake
    binlog dump|verify|recover` given such files are covered by tests/unit/test_recover_cli.py,
    tests/unit/test_verify_cli.py and tests/integration/test_binlog_commands.py; see
    docs/recovery.md, "Acceptance scenarios".)
"""

from __future__ import annotations

import io
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from acceptance_testing import (
    assert_refused,
    copy_state,
    last_source_transaction,
    relay_dir,
    state_fingerprint,
    wait_for_lake,
)

from binlake.apply.replicate import ReplicateResult, Replicator
from binlake.cli.main import run
from binlake.config import load_config
from binlake.console import Console
from binlake.storage.index import read_index
from binlake.storage.lock import read_holder
from binlake_dev.sandbox import MariaDBSandbox
from crash.applier_workload import ShopWorkload
from receiver_testing import run_receive
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    lake_warehouse,
    module_source,
    replicate_in_process,
    run_replicate,
)

pytestmark = pytest.mark.acceptance

EXIT_LOCKED = 75
EXIT_FORMAT = 65
EXIT_STORAGE = 74
EXIT_CONFIG = 78


source = module_source("acceptance-cli-source")


class ReplicatorThread:
    """`binlake replicate` (no --until-caught-up) running in a thread of this process with the
    session's Spark: this process holds the state folder's lock while it runs."""

    def __init__(self, config: Path, spark: object) -> None:
        self.output = io.StringIO()
        self.replicator = Replicator(
            load_config(config),
            spark=spark,  # type: ignore[arg-type]
            console=Console(self.output, interval_s=5.0, live=False),
        )
        self.result: ReplicateResult | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="first-replicate")
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.replicator.run()
        except BaseException as error:  # raised by the test
            self.error = error

    def stop(self) -> ReplicateResult:
        self.replicator.request_stop()
        self.thread.join(120)
        assert not self.thread.is_alive(), f"replicate did not stop\n{self.output.getvalue()}"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def test_a_second_replicate_on_the_same_state_folder_is_refused_naming_the_first(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Scenario 11. The first replicate applies the workload; a `binlake replicate` started on
    the same config exits 75 naming the first's process id in its error and its hint, having
    left the lock to the first; the first then applies more and stops cleanly."""
    database = "acc_lock"
    workload = ShopWorkload(source, database, seed=11).create()
    workload.run(5)
    warehouse = lake_warehouse(spark)
    config = config_for(tmp_path, source, spark, database)
    first = ReplicatorThread(config, spark)
    try:
        wait_for_lake(warehouse, database, last_source_transaction(source), timeout=120)
        second = run_replicate(config, "--until-caught-up")
        _error, hint = assert_refused(second, EXIT_LOCKED, f"binlake process {os.getpid()}")
        assert f"stop process {os.getpid()}" in hint, hint
        holder = read_holder(tmp_path / "state")
        assert holder is not None and holder.pid == os.getpid(), "the lock changed hands"
        assert first.thread.is_alive(), first.output.getvalue()
        workload.run(5)
        wait_for_lake(warehouse, database, last_source_transaction(source), timeout=120)
    finally:
        result = first.stop()
    assert result.applied.transactions >= 10
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)


# ---- scenario 12 --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replicated(
    tmp_path_factory: pytest.TempPathFactory, source: MariaDBSandbox, spark: object
) -> Path:
    """A state folder a real pipeline left: a replicate run applied the first transactions, two
    `binlake receive` runs then fetched more into two more relay files (not applied yet).
    Returns the folder holding ``binlake.toml`` and ``state``."""
    base = tmp_path_factory.mktemp("acceptance-cli-state")
    database = "acc_cli"
    workload = ShopWorkload(source, database, seed=12).create()
    workload.run(4)
    config = config_for(
        base,
        source,
        spark,
        database,
        receiver="max_relay_file_size = 4096\n",  # files rotate, the checkpoint moves: recorded
    )
    replicate_in_process(config, spark)
    assert (base / "state" / "relay.checkpoint").exists()
    for _ in range(2):
        workload.run(3)
        received = run_receive(config, "--until-caught-up")
        assert received.returncode == 0, describe(received)
    assert len(read_index(relay_dir(base / "state") / "relay-bin.index")) >= 3
    return base


def replace_with_foreign(path: Path) -> None:
    path.write_bytes(b"# notes\nthis is not a binlake file\n" * 20)


def truncate_half(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def relay_file(state: Path, which: int) -> Path:
    return read_index(relay_dir(state) / "relay-bin.index")[which]


def list_a_missing_relay_file(state: Path) -> None:
    index = relay_dir(state) / "relay-bin.index"
    index.write_text(index.read_text() + "relay-bin.999999\n")


def garble_index(state: Path) -> None:
    (relay_dir(state) / "relay-bin.index").write_bytes(bytes(range(256)) * 4)


#: case -> (what the test does to a copy of the state folder, the exit code, words the error
#: line must hold). The relay file damaged is one recovery reads: at or after the checkpoint.
STATE_DAMAGE: dict[str, tuple[Callable[[Path], None], int, str]] = {
    "source-state-foreign": (
        lambda s: replace_with_foreign(s / "source.state"),
        EXIT_STORAGE,
        "source.state",
    ),
    "source-state-truncated": (
        lambda s: truncate_half(s / "source.state"),
        EXIT_STORAGE,
        "source.state",
    ),
    "checkpoint-foreign": (
        lambda s: replace_with_foreign(s / "relay.checkpoint"),
        EXIT_STORAGE,
        "relay.checkpoint",
    ),
    "checkpoint-truncated": (
        lambda s: truncate_half(s / "relay.checkpoint"),
        EXIT_STORAGE,
        "relay.checkpoint",
    ),
    "index-lists-a-missing-file": (list_a_missing_relay_file, EXIT_STORAGE, "relay-bin.999999"),
    "index-garbage": (garble_index, EXIT_STORAGE, "relay-bin.index"),
    "older-relay-file-truncated": (
        lambda s: truncate_half(relay_file(s, -2)),
        EXIT_FORMAT,
        "relay-bin.",
    ),
    "newest-relay-file-foreign": (
        lambda s: replace_with_foreign(relay_file(s, -1)),
        EXIT_FORMAT,
        "relay-bin.",
    ),
}


def binlake(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The ``binlake`` command in this process (what ``main`` runs, minus ``sys.exit``): the
    exit code it would exit with, and what it printed. Not for a `replicate` that may get as
    far as starting Spark: this process has a session already."""
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["binlake", *args], code, out, err)


def copy_case(replicated: Path, to: Path) -> Path:
    """A copy of the config and state folder in ``to``; returns the config."""
    copy_state(replicated / "state", to / "state")
    text = (replicated / "binlake.toml").read_text()
    config = to / "binlake.toml"
    config.write_text(text.replace(str(replicated / "state"), str(to / "state")))
    return config


@pytest.mark.parametrize("case", sorted(STATE_DAMAGE))
def test_a_damaged_state_folder_is_refused_with_a_typed_error_and_left_untouched(
    tmp_path: Path, replicated: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scenario 12: `binlake replicate` on a state folder with one damaged file stops with the
    file's typed error and exit code, names the file, prints a hint and no traceback, and
    leaves the folder byte for byte as it was (the lock file aside: every run rewrites its
    holder's details). `binlake status` (read-only, no recovery, made to run beside a live
    replicate: it reports what it cannot read and goes on) on the same folder must not print a
    traceback or write anything either, and when it stops, it stops typed."""
    damage, code, words = STATE_DAMAGE[case]
    config = copy_case(replicated, tmp_path)
    state = tmp_path / "state"
    damage(state)
    before = state_fingerprint(state)
    replicate = run_replicate(config, "--until-caught-up", timeout=180)  # its own process
    assert_refused(replicate, code, words)
    assert state_fingerprint(state) == before, "replicate wrote to a state folder it refused"
    status = binlake(capsys, "status", "--config", str(config))
    assert "Traceback" not in status.stderr + status.stdout, status.stderr
    if status.returncode != 0:
        assert_refused(status, status.returncode)
    assert state_fingerprint(state) == before, "status wrote to the state folder"


#: Config files that are not binlake configs, and what the error line must name.
BAD_CONFIGS: dict[str, tuple[bytes, str]] = {
    "binary": (bytes(range(256)) * 8, "binlake.toml"),
    "cut-inside-a-string": (b'[source]\nhost = "127.0.', "binlake.toml"),
    "truncated": (b'[source]\nhost = "127.0.0.1"\nport = 33', "[state]"),
    "foreign-toml": (b'[tool.poetry]\nname = "not-binlake"\n', "[tool]"),
    "empty": (b"", "[source]"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
@pytest.mark.parametrize("command", ["replicate", "receive", "status", "verify"])
def test_a_bad_config_file_is_refused_by_every_command_with_a_config_error(
    tmp_path: Path, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scenario 12, the config file: a binary file and one cut inside a string (not TOML: the
    error names the file), a truncated one, another tool's TOML, an empty file (TOML: the error
    names the section): exit 78, a hint, no traceback, the file unchanged, no state created."""
    content, named = BAD_CONFIGS[case]
    config = tmp_path / "binlake.toml"
    config.write_bytes(content)
    assert_refused(binlake(capsys, command, "--config", str(config)), EXIT_CONFIG, named)
    assert config.read_bytes() == content
    assert not (tmp_path / "state").exists()
