"""`binlake receive` killed at each of its crash points during a live workload (and in ``cut``
mode a power cut under its state folder after the kill: tests/cut_modes.py), the source
killed under it, and the network failing under it: after a restart the relay log's transactions
equal the source binlog's, byte for byte, none lost, none doubled.

Each crash-point case has its own MariaDB (small binlogs, so the source rotates often) with a
backlog of transactions; its receiver copies the binlog from the first file while a workload
thread commits more, and dies at the chosen pass of its crash point.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from binlake.crashpoints import POINTS
from binlake_dev.sandbox import MariaDBSandbox
from cut_modes import Ground, crash_cases
from receiver_testing import (
    BackgroundReceive,
    Workload,
    assert_relay_equals_source,
    describe,
    run_receive,
    wait_for_relay,
    write_config,
)
from relay_testing import check_recovered_log
from tcp_proxy import TcpProxy

SMALL_BINLOGS = ["--max-binlog-size=4096"]
#: A sync every two transactions: many fsync windows to crash in.
CRASH_RECEIVER = "sync_max_transactions = 2\n"
COVERED_PREFIXES = ("relay_", "receiver_")

#: crash point -> the pass that dies: early enough to land inside the first run's catch-up of
#: the backlog (>= 15 transactions, >= 1 source rotation) even in the first case.
PASS_THAT_DIES: dict[str, int] = {
    "relay_before_append": 40,
    "relay_mid_event": 60,
    "relay_after_append": 75,
    "relay_before_fsync": 4,
    "relay_after_fsync": 5,
    "relay_rotate_before_index": 2,
    "relay_rotate_after_index": 2,
    "relay_close_before_flag": 1,
    "receiver_identity_recorded": 1,
    "receiver_after_sync": 3,
    "receiver_before_source_rotate": 1,
    "receiver_stop_before_close": 1,
}


def test_every_relay_and_receiver_crash_point_has_a_case() -> None:
    registered = {name for name in POINTS if name.startswith(COVERED_PREFIXES)}
    assert set(PASS_THAT_DIES) == registered


SandboxFactory = Callable[..., MariaDBSandbox]
#: Each point with kill -9 (``make test``), and with kill -9 then a power cut (``make
#: power-cut``: a MariaDB each, 10 s a case; ``make test`` cuts the power at the relay points in
#: test_relay_crash.py and under `binlake receive` in the short power-cut soak).
CASES = crash_cases(sorted(PASS_THAT_DIES), slow=PASS_THAT_DIES)


@pytest.mark.parametrize(("point", "ground"), CASES, indirect=["ground"])
def test_receive_killed_at_a_crash_point_then_restarted_equals_the_source(
    sandbox_factory: SandboxFactory, tmp_path: Path, ground: Ground, point: str
) -> None:
    source = sandbox_factory(extra_args=SMALL_BINLOGS).start()
    workload = Workload(source).create()
    workload.run(15)
    state = ground.folder("state")
    config = write_config(tmp_path / "c.toml", source.port, state, receiver=CRASH_RECEIVER)
    live = workload.in_thread(150)  # commits go on while the receiver starts and crashes
    first = run_receive(config, "--until-caught-up", crash_point=f"{point}:{PASS_THAT_DIES[point]}")
    live.join()
    assert not workload.errors
    assert first.returncode == -9, f"{point} was never reached\n{describe(first)}"
    ground.crash()
    again = run_receive(config, "--until-caught-up")
    assert again.returncode == 0, describe(again)
    check_recovered_log(state / "relay")
    assert_relay_equals_source(state, source)


def test_source_killed_mid_workload_the_receiver_reconnects_and_loses_nothing(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    sandbox = sandbox_factory(extra_args=SMALL_BINLOGS).start()
    workload = Workload(sandbox).create()
    workload.run(10)
    state = tmp_path / "state"
    receiver = BackgroundReceive(write_config(tmp_path / "c.toml", sandbox.port, state))
    wait_for_relay(state, sandbox, receiver)
    live = workload.in_thread(2000)
    time.sleep(0.4)
    sandbox.kill()  # SIGKILL mid-workload
    live.join()
    assert workload.errors, "the workload was still running when the source died"
    sandbox.start()
    Workload(sandbox, next_id=workload.next_id + 100_000).run(10)
    wait_for_relay(state, sandbox, receiver)
    assert receiver.stop() == 0, receiver.output()
    assert "connection lost" in receiver.err.read_text()
    check_recovered_log(state / "relay")
    assert_relay_equals_source(state, sandbox)


def fault(proxy: TcpProxy, kind: str) -> None:
    if kind == "drop":
        proxy.drop()
    elif kind == "reset":
        proxy.reset()
    elif kind == "stall":
        proxy.stall(2.5)  # > 2 heartbeat periods (0.5 s): the receiver gives up on the link
    elif kind == "cut_mid_event":
        proxy.cut_after(1500)  # RST after 1500 more bytes: inside some event


@pytest.mark.parametrize("kind", ["drop", "reset", "stall", "cut_mid_event"])
def test_network_faults_make_the_receiver_reconnect_and_lose_nothing(
    sandbox_factory: SandboxFactory, tmp_path: Path, kind: str
) -> None:
    sandbox = sandbox_factory(extra_args=SMALL_BINLOGS).start()
    workload = Workload(sandbox).create()
    workload.run(5)
    state = tmp_path / "state"
    with TcpProxy(target_port=sandbox.port) as proxy:
        config = write_config(tmp_path / "c.toml", proxy.port, state, host=proxy.host)
        receiver = BackgroundReceive(config)
        wait_for_relay(state, sandbox, receiver)
        live = workload.in_thread(200)
        time.sleep(0.05)
        fault(proxy, kind)
        live.join()
        wait_for_relay(state, sandbox, receiver)
        assert receiver.stop() == 0, receiver.output()
        assert proxy.connections >= 2, "the receiver must have connected again"
    assert "connection lost" in receiver.err.read_text(), receiver.output()
    check_recovered_log(state / "relay")
    assert_relay_equals_source(state, sandbox)
