"""Soak: a mixed workload with DDL runs while `binlake replicate` is killed (SIGKILL) at random
moments, again and again, with faults injected at random in between: network faults on a TCP
proxy between the source and the receiver (drop, reset, stall, truncate), clean restarts of the
source, and, after some kills, the newest relay file's tail torn in one of WL#5493's shapes (or
a CRC32 mismatch inside its last transaction). At the end one `--until-caught-up` run, then
`verify` and the exactly-once check of every table's snapshot history.

Marked ``slow``: `make soak [MINUTES=5]` runs it, `make test` not. The duration comes from the
environment (``SOAK_MINUTES``, default 5); what was injected is printed (run with ``-s``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from applier_workload import ShopWorkload

from acceptance.acceptance_testing import TORN_SHAPES, damage_relay_tail, newest_relay_file
from binlake.storage.tail_scan import scan_file
from binlake_dev.sandbox import MariaDBSandbox
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    replicate_command,
    replicate_env,
    run_replicate,
)
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

#: A cycle of DDL that leaves the columns the workload writes alone.
DDL_ROUND = (
    "ALTER TABLE {db}.orders ADD COLUMN c{n} INT",
    "TRUNCATE TABLE {db}.audit",
    "ALTER TABLE {db}.orders RENAME COLUMN extra TO spare",
    "ALTER TABLE {db}.orders DROP COLUMN c{n}, MODIFY total DECIMAL(12,2)",
    "ALTER TABLE {db}.orders RENAME COLUMN spare TO extra",
)
#: Faults injected while a run is alive (at most one per run, at a random moment).
LIVE_FAULTS = ("proxy_drop", "proxy_reset", "proxy_stall", "proxy_truncate", "source_restart")
#: Tail damage after a kill: the four torn shapes, and a CRC32 mismatch inside the last
#: transaction (followed by its intact XID).
TAIL_DAMAGE = (*TORN_SHAPES, "crc_inside_last_transaction")
CHUNK = 10


class MixedWorkload:
    """The shop workload in a thread, with a DDL every ``ddl_every`` transactions. It commits
    in chunks; ``pause()`` holds it between two chunks (a source restart must not fail it)."""

    def __init__(self, workload: ShopWorkload, ddl_every: int = 150) -> None:
        self.workload = workload
        self.ddl_every = ddl_every
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="soak-workload")
        self.ddl_done = 0
        self.lock = threading.Lock()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                for _ in range(self.ddl_every // CHUNK):
                    with self.lock:
                        self.workload.run(CHUNK, pause_s=0.03)
                    if self.stop.is_set():
                        return
                n = self.ddl_done
                statement = DDL_ROUND[n % len(DDL_ROUND)]
                with self.lock:
                    self.workload.ddl(statement.replace("{n}", str(n // len(DDL_ROUND))))
                self.ddl_done += 1
        except BaseException as error:
            self.errors.append(error)

    def pause(self) -> threading.Lock:
        return self.lock


def inject_live_fault(
    fault: str, rng: random.Random, proxy: TcpProxy, source: MariaDBSandbox, mixed: MixedWorkload
) -> None:
    if fault == "proxy_drop":
        proxy.drop()
    elif fault == "proxy_reset":
        proxy.reset()
    elif fault == "proxy_stall":
        proxy.stall(rng.uniform(1.5, 4.0))  # heartbeats every 0.5 s: silent past 2 periods
    elif fault == "proxy_truncate":
        proxy.cut_after(rng.randrange(100, 20_000), reset=rng.random() < 0.5)
    elif fault == "source_restart":
        with mixed.pause():
            source.restart()


def damage_after_kill(rng: random.Random, state: Path) -> str | None:
    """Tear the newest relay file's tail in a random shape; None when that file holds no
    complete transaction yet (nothing to tear)."""
    newest = newest_relay_file(state)
    if not scan_file(newest).gtids:
        return None
    shape = rng.choice(TAIL_DAMAGE)
    damage_relay_tail(newest, shape)
    return shape


def test_random_kills_and_faults_during_a_mixed_workload_lose_nothing_and_double_nothing(
    tmp_path: Path, sandbox_factory: object, spark: object
) -> None:
    minutes = float(os.environ.get("SOAK_MINUTES", "5"))
    seed = int(os.environ.get("SOAK_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    source: MariaDBSandbox = sandbox_factory().start()  # type: ignore[operator]
    database = "soak"
    workload = ShopWorkload(source, database, seed=seed).create()
    state = tmp_path / "state"
    injected: Counter[str] = Counter()
    kills = 0
    mixed = MixedWorkload(workload)
    with TcpProxy(target_port=source.port, lifetime_s=minutes * 60 + 1800) as proxy:
        config = config_for(
            tmp_path,
            source,
            spark,
            database,
            receiver="max_relay_file_size = 65536\n",
            applier="max_seconds = 1.5\n",
            port=proxy.port,
        )
        mixed.thread.start()
        deadline = time.monotonic() + minutes * 60
        try:
            while time.monotonic() < deadline:
                err_path = tmp_path / f"run{kills}.err"
                with err_path.open("w") as err:
                    process = subprocess.Popen(
                        replicate_command(config),
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        text=True,
                        env=replicate_env(),
                    )
                life = rng.uniform(2.0, 25.0)
                fault = rng.choice((*LIVE_FAULTS, None, None))
                if fault is not None:
                    at = rng.uniform(0.0, life)
                    time.sleep(at)
                    inject_live_fault(fault, rng, proxy, source, mixed)
                    injected[fault] += 1
                    life -= at
                time.sleep(max(0.0, life))
                if process.poll() is not None:
                    pytest.fail(
                        f"replicate exited by itself (rc={process.returncode}) after "
                        f"{dict(injected)}:\n{err_path.read_text()[-6000:]}"
                    )
                process.send_signal(signal.SIGKILL)
                process.wait()
                kills += 1
                if rng.random() < 0.4 and (shape := damage_after_kill(rng, state)) is not None:
                    injected[f"torn_tail_{shape}"] += 1
        finally:
            mixed.stop.set()
            mixed.thread.join()
        assert not mixed.errors, mixed.errors
        # An ALTER's column changes reach Iceberg with the table's next rows (its TABLE_MAP):
        # end with rows on every table, so that no DDL is still pending when verify compares.
        workload.run(3)
        final = run_replicate(config, "--until-caught-up", timeout=900)
        assert final.returncode == 0, describe(final)
        checked = assert_verify_passes(config, spark)
        history = assert_history_is_exactly_once(config, spark)
    faults = ", ".join(f"{kind} {count}" for kind, count in sorted(injected.items())) or "none"
    print(
        f"\nsoak (seed {seed}): {minutes:g} minutes, {kills} kills (SIGKILL), "
        f"{sum(injected.values())} faults: {faults}; "
        f"{workload.next_id - 1} orders, {mixed.ddl_done} DDL statements; "
        f"verify passed for {len(checked)} tables, {sum(history.values())} binlake snapshots, "
        "each batch and position once: nothing lost, nothing doubled"
    )
