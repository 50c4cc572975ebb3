"""Soak: a mixed workload with DDL runs while `binlake replicate` is killed (SIGKILL) at random
moments, again and again; at the end one `--until-caught-up` run, then `verify` and the
exactly-once history check. Marked ``slow``: `make soak [MINUTES=5]` runs it, `make test` not.

The duration comes from the environment (``SOAK_MINUTES``, default 5); the number of kills is
printed (run with ``-s`` to see it).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from applier_workload import ShopWorkload

from binlake.sandbox import MariaDBSandbox
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    describe,
    lake_warehouse,
    replicate_command,
    replicate_env,
    run_replicate,
    write_config,
)

pytestmark = pytest.mark.slow

#: A cycle of DDL that leaves the columns the workload writes alone.
DDL_ROUND = (
    "ALTER TABLE {db}.orders ADD COLUMN c{n} INT",
    "TRUNCATE TABLE {db}.audit",
    "ALTER TABLE {db}.orders RENAME COLUMN extra TO spare",
    "ALTER TABLE {db}.orders DROP COLUMN c{n}, MODIFY total DECIMAL(12,2)",
    "ALTER TABLE {db}.orders RENAME COLUMN spare TO extra",
)


class MixedWorkload:
    """The shop workload in a thread, with a DDL every ``ddl_every`` transactions."""

    def __init__(self, workload: ShopWorkload, ddl_every: int = 150) -> None:
        self.workload = workload
        self.ddl_every = ddl_every
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="soak-workload")
        self.ddl_done = 0

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self.workload.run(self.ddl_every, pause_s=0.03)
                n = self.ddl_done
                statement = DDL_ROUND[n % len(DDL_ROUND)]
                self.workload.ddl(statement.replace("{n}", str(n // len(DDL_ROUND))))
                self.ddl_done += 1
        except BaseException as error:
            self.errors.append(error)


def test_random_kills_during_a_mixed_workload_lose_nothing_and_double_nothing(
    tmp_path: Path, sandbox_factory: object, spark: object
) -> None:
    minutes = float(os.environ.get("SOAK_MINUTES", "5"))
    source: MariaDBSandbox = sandbox_factory().start()  # type: ignore[operator]
    database = "soak"
    workload = ShopWorkload(source, database, seed=int(time.time())).create()
    config = write_config(
        tmp_path / "binlake.toml",
        source,
        warehouse=lake_warehouse(spark),
        include=[f"{database}.*"],
        receiver="max_relay_file_size = 65536\n",
        applier="max_seconds = 1.5\n",
    )
    mixed = MixedWorkload(workload)
    mixed.thread.start()
    rng = random.Random()
    kills = 0
    deadline = time.monotonic() + minutes * 60
    try:
        while time.monotonic() < deadline:
            process = subprocess.Popen(
                replicate_command(config),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=replicate_env(),
            )
            time.sleep(rng.uniform(2.0, 25.0))
            if process.poll() is not None:
                pytest.fail(
                    f"replicate exited by itself (rc={process.returncode}):\n"
                    f"{process.stderr.read() if process.stderr else ''}"
                )
            process.send_signal(signal.SIGKILL)
            process.wait()
            kills += 1
    finally:
        mixed.stop.set()
        mixed.thread.join()
    assert not mixed.errors, mixed.errors
    # An ALTER's column changes reach Iceberg with the table's next rows (its TABLE_MAP):
    # end with rows on every table, so that no DDL is still pending when verify compares.
    workload.run(3)
    final = run_replicate(config, "--until-caught-up", timeout=900)
    assert final.returncode == 0, describe(final)
    print(
        f"\nsoak: {kills} kills in {minutes:g} minutes, {workload.next_id - 1} orders, "
        f"{mixed.ddl_done} DDL statements"
    )
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
