"""Soak: a mixed workload with DDL runs while `binlake replicate` is killed (SIGKILL) at random
moments, again and again, with faults injected at random in between: network faults on a TCP
proxy between the source and every connection binlake opens (drop, reset, stall, truncate),
clean restarts of the source, and, after some kills, the newest relay file's tail torn in one of
WL#5493's shapes (or a CRC32 mismatch inside its last transaction). The workload writes MariaDB's
UUID and INET6 columns and ALTERs whose DEFAULT is the statement's time in the SYSTEM time zone:
the source facts the applier reads from the relay log (binlog/source_facts.py). At the end one
`--until-caught-up` run, then `verify` and the exactly-once check of every table's snapshot
history.

Faults are dealt from shuffled decks (every kind once before any kind twice), so a run long
enough for a deck of each sees every fault kind. The seed is printed before the first fault;
``SOAK_SEED=n`` replays the random choices (timing aside).

* `make soak [MINUTES=5] [SEED=n]`: the slow soak (marked ``slow``: not in `make test`), its
  duration from ``SOAK_MINUTES``, a DDL every 300 transactions. Each run's life is counted
  from its start (two runs in five) or from the moment it streams from the source (one in
  five), each then 2 s to ``SOAK_MAX_LIFE_S`` (12), or from its first batch of row changes
  applied (two in five, 0.5 to 6 s: kills while the applier works, not while Spark starts;
  batches of DDL alone do not count, see ``_ROW_CHANGES``), dealt like the faults. Per run,
  the mean life plus its wait: 7 s, about 11.5 s (streaming comes 4 to 5 s after the start)
  and 3.25 s plus the wait for the first batch (23 s on average in a quiet 30-minute soak,
  2026-11-27): about 16 s a kill with the restart, about 110 kills in 30 minutes (the deck
  before, one ``start`` and two ``streaming`` a round with lives up to 16 s, made 97 in a
  quiet 30-minute soak, seed 287924: short of issue 11's 100);
* `make test`: a short soak with the fixed seed ``SHORT_SOAK_SEED``: as many runs as it takes
  to deal every live fault kind and every tail damage once (5 runs of a few seconds), each live
  fault injected once the run streams from the source, so that a drop or reset hits live
  connections: the receiver's stream and its source-facts queries (issue 11: a reset of the
  applier's own connection to the source once stopped replicate; the applier now reads those
  facts from the relay log, and this keeps the failure from coming back unseen).

Power cuts at random instants (issue #38): the same soak with the state folder and the warehouse
(an embedded catalog of its own, ``catalog.sqlite`` with it) on the power-cut file system
(tests/cut_modes.py); after each kill (of the run's whole process group, its JVM
too) the power is cut (everything not fsynced dropped; the newest unsynced write torn at 512 or
4096 bytes, or not, at random) instead of a relay tail torn by hand. A run that stops by itself
after a cut is a refusal: counted, and it must be typed (a BinlakeError's "error:" and "hint:"
lines). The end is the same: verify (nothing lost) and the history check (nothing doubled).
`make power-cut`: ``POWER_CUTS`` cuts (200); `make test`: ``SHORT_POWER_CUTS``.

Every kill is classed by what its run had printed (its stderr, ``run{n}.err``) when it died:
``starting`` (it had not yet said "streaming from" the source: relay recovery, login),
``receiving`` (streaming, but the applier had not applied a batch in this run: mostly
Spark's start-up), ``applying`` (its progress line counted row changes applied, their
commits made: the applier was at work). The progress line comes every ``progress_interval_s``
(1 s), so a kill less than a second after a run's first batch counts as ``receiving``: the
count errs low. Both soaks print the counts per class; the long soak fails when fewer than a
third of its kills landed ``applying`` (after verify and the history check, which come
first; judged from ``JUDGED_FROM_KILLS`` kills on: a 30-minute soak is to make over 100).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from applier_workload import ShopWorkload

from acceptance.acceptance_testing import TORN_SHAPES, damage_relay_tail, newest_relay_file
from binlake.storage.tail_scan import scan_file
from binlake_dev.sandbox import MariaDBSandbox
from cut_modes import CUT, Ground
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    replicate_command,
    replicate_env,
)
from tcp_proxy import TcpProxy

#: A cycle of DDL that leaves the columns the workload writes alone.
DDL_ROUND = (
    "ALTER TABLE {db}.orders ADD COLUMN c{n} INT",
    "TRUNCATE TABLE {db}.audit",
    "ALTER TABLE {db}.devices ADD COLUMN seen{n} DATETIME(6) NOT NULL "
    "DEFAULT CURRENT_TIMESTAMP(6)",  # the SYSTEM zone's local time: a recorded conversion
    "ALTER TABLE {db}.orders RENAME COLUMN extra TO spare",
    "ALTER TABLE {db}.orders DROP COLUMN c{n}, MODIFY total DECIMAL(12,2)",
    "ALTER TABLE {db}.devices DROP COLUMN seen{n}",
    "ALTER TABLE {db}.orders RENAME COLUMN spare TO extra",
)
#: MariaDB's UUID and INET6 columns: the hints the receiver records with their TABLE_MAPs.
DEVICES = "CREATE TABLE {db}.devices (id INT PRIMARY KEY, u UUID, ip INET6, hits INT)"
#: Faults injected while a run is alive (at most one per run, at a random moment).
LIVE_FAULTS = ("proxy_drop", "proxy_reset", "proxy_stall", "proxy_truncate", "source_restart")
#: Tail damage after a kill: the four torn shapes, and a CRC32 mismatch inside the last
#: transaction (followed by its intact XID).
TAIL_DAMAGE = (*TORN_SHAPES, "crc_inside_last_transaction")
CHUNK = 10
#: The short soak of `make test`: its seed (the run of issue 11's failure), and each run's life.
SHORT_SOAK_SEED = 926091
SHORT_SOAK_LIFE_S = (3.0, 5.0)
#: Longest wait for a run to stream (or to apply its first batch) before its life starts anyway.
STREAMING_WAIT_S = 60.0
APPLIED_WAIT_S = 180.0
#: Power cuts of the random-instant soaks (module docstring), and their runs' lives.
POWER_CUTS = int(os.environ.get("POWER_CUTS", "200"))
SHORT_POWER_CUTS = 3
POWER_CUT_SEED = 380038
POWER_CUT_TEARS = (None, 512, 4096)
#: Typed refusals a power-cut soak goes on after (each run after one starts afresh).
MAX_REFUSALS = 5
#: Where a kill landed (module docstring); the long soak wants a third ``applying`` at least.
KILL_CLASSES = ("starting", "receiving", "applying")
MIN_APPLYING_SHARE = 1 / 3
#: The long soak's deck of anchors (``Lives``): a run's life from its start, from the moment
#: it streams, from its first batch applied. Dealt in rounds, every 5 runs two wait for their
#: first batch: from 20 kills on, a third ``applying`` at least even if no other kill is. Two
#: ``start`` a round keep a 30-minute soak over 100 kills (see the module's docstring).
LONG_SOAK_ANCHORS = ("start", "start", "streaming", "applied", "applied")
JUDGED_FROM_KILLS = 20
#: The applier's progress line: "... (R row changes, T transactions, B batches)". A run counts
#: as applying once it committed row changes: batches of DDL or other control events alone (a
#: new state folder's first ones) do not count, and a run anchored on them would be killed
#: before the backlog's first row batch committed, run after run (the applier never caught up
#: during a 30-minute soak with that anchor: every run read the relay log from its first file).
_ROW_CHANGES = re.compile(r"^apply: .*\(([\d,]+) row changes, [\d,]+ transactions", re.MULTILINE)


@dataclass(frozen=True)
class Lives:
    """How long each run lives before its kill: ``life_s`` counted from its start, or from the
    moment it streams, or ``applied_s`` from its first batch applied; which, dealt from the deck
    ``anchors`` (a random stream of its own, the seed's, so that the faults a seed deals do not
    depend on it)."""

    life_s: tuple[float, float]
    anchors: tuple[str, ...] = ("start",)
    applied_s: tuple[float, float] = (0.5, 6.0)


@dataclass
class SoakResult:
    """What a soak did: the faults injected, where each kill landed, and how long the runs
    that waited for it took to stream and to apply their first batch."""

    injected: Counter[str] = field(default_factory=Counter)
    landed: Counter[str] = field(default_factory=Counter)
    #: Power cuts made, and the runs after one that stopped by themselves with a typed error.
    cuts: int = 0
    refused: list[str] = field(default_factory=list)
    waited: dict[str, list[float]] = field(default_factory=lambda: {"streaming": [], "applied": []})

    @property
    def kills(self) -> int:
        return sum(self.landed.values())

    def describe(self) -> str:
        classes = ", ".join(f"{kind} {self.landed[kind]}" for kind in KILL_CLASSES)
        waits = "; ".join(
            f"{anchor} after {sum(times) / len(times):.1f} s on average ({len(times)} runs)"
            for anchor, times in self.waited.items()
            if times
        )
        cuts = f"; {self.cuts} power cuts, {len(self.refused)} refused" if self.cuts else ""
        return f"{self.kills} kills (SIGKILL): {classes}{cuts}" + (f"; {waits}" if waits else "")


class Deck:
    """Kinds dealt in shuffled rounds: every kind once before any kind twice."""

    def __init__(self, kinds: tuple[str, ...], rng: random.Random) -> None:
        self.kinds, self.rng = kinds, rng
        self.left: list[str] = []

    def deal(self) -> str:
        if not self.left:
            self.left = list(self.kinds)
            self.rng.shuffle(self.left)
        return self.left.pop()


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
                        self._device()
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

    def _device(self) -> None:
        rng = self.workload.random
        device = rng.randrange(1, 200)
        self.workload.source.execute(
            f"INSERT INTO {self.workload.database}.devices (id, u, ip, hits) VALUES "
            "(%s, UUID(), %s, 1) ON DUPLICATE KEY UPDATE hits = hits + 1, u = UUID()",
            (device, f"2001:db8::{device:x}"),
        )


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


def catch_up(config: Path, log: Path, timeout: float) -> int | None:
    """`binlake replicate --until-caught-up`, its stderr in ``log``: its exit code, or None
    when it was still running after ``timeout`` (then killed; ``log`` says where it was)."""
    with log.open("w") as err:
        process = subprocess.Popen(
            [*replicate_command(config), "--until-caught-up"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=replicate_env(),
        )
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def damage_after_kill(shape: str, state: Path) -> bool:
    """Tear the newest relay file's tail in ``shape``; False when there is no relay log yet or
    its newest file holds no complete transaction (nothing to tear)."""
    if not (state / "relay" / "relay-bin.index").exists():
        return False  # killed before the receiver made its first relay file
    newest = newest_relay_file(state)
    if not scan_file(newest).gtids:
        return False
    damage_relay_tail(newest, shape)
    return True


@pytest.mark.slow
def test_random_kills_and_faults_during_a_mixed_workload_lose_nothing_and_double_nothing(
    tmp_path: Path, sandbox_factory: object, spark: object
) -> None:
    minutes = float(os.environ.get("SOAK_MINUTES", "5"))
    seed = int(os.environ.get("SOAK_SEED", str(time.time_ns() % 1_000_000)))
    life_s = (2.0, float(os.environ.get("SOAK_MAX_LIFE_S", "12")))
    result = soak(
        tmp_path,
        sandbox_factory,
        spark,
        seed=seed,
        seconds=minutes * 60,
        lives=Lives(life_s, LONG_SOAK_ANCHORS),
        ddl_every=300,
    )
    if result.kills < JUDGED_FROM_KILLS:
        print(f"soak: {result.kills} kills, too few to judge where they landed", flush=True)
        return
    assert result.landed["applying"] >= MIN_APPLYING_SHARE * result.kills, (
        f"fewer than a third of the kills landed while the applier was at work: "
        f"{result.describe()} (seed {seed})"
    )


def test_a_short_soak_with_every_fault_kind_loses_nothing_and_doubles_nothing(
    tmp_path: Path, sandbox_factory: object, spark: object
) -> None:
    result = soak(
        tmp_path,
        sandbox_factory,
        spark,
        seed=SHORT_SOAK_SEED,
        seconds=0.0,
        lives=Lives(SHORT_SOAK_LIFE_S, ("streaming",)),
        every_kind=True,
        fault_odds=1.0,
        tear_odds=1.0,
        ddl_every=40,
    )
    assert _every_kind(result.injected), result.injected


#: The power-cut soaks' runs: lives from their start, their streaming or their first batch.
CUT_LIVES = Lives((1.0, 6.0), ("start", "streaming", "applied"), applied_s=(0.2, 4.0))
CUT_SOAK: dict[str, Any] = {"seconds": 0.0, "fault_odds": 0.2}


@pytest.mark.powercut
@pytest.mark.parametrize("ground", [CUT], indirect=True)
@pytest.mark.parametrize(
    "cuts",
    [
        pytest.param(SHORT_POWER_CUTS, id="short"),
        pytest.param(POWER_CUTS, id="long", marks=pytest.mark.slow),
    ],
)
def test_power_cuts_at_random_instants_during_a_mixed_workload_lose_nothing_and_double_nothing(
    tmp_path: Path, sandbox_factory: object, spark: object, ground: Ground, cuts: int
) -> None:
    """``cuts`` power cuts at random instants of runs streaming the mixed workload: after the
    final catch-up, verify and the history check (0 lost, 0 doubled); every refusal typed."""
    seed = int(os.environ.get("SOAK_SEED", str(POWER_CUT_SEED)))
    result = soak(
        tmp_path,
        sandbox_factory,
        spark,
        seed=seed,
        lives=CUT_LIVES,
        **CUT_SOAK,
        cuts=cuts,
        ground=ground,
    )
    assert result.cuts >= cuts, result.describe()
    print(
        f"power cuts (seed {seed}): {result.cuts} cuts at random instants, 0 lost, 0 doubled, "
        f"{len(result.refused)} refused (typed): {sorted(set(result.refused))}",
        flush=True,
    )


def soak(
    tmp_path: Path,
    sandbox_factory: object,
    spark: object,
    *,
    seed: int,
    seconds: float,
    lives: Lives,
    every_kind: bool = False,
    fault_odds: float = 0.75,
    tear_odds: float = 0.4,
    ddl_every: int = 150,
    ground: Ground | None = None,
    cuts: int = 0,
) -> SoakResult:
    """Kills and faults for ``seconds`` (longer with ``every_kind`` until each live fault and
    tail damage was dealt once, and until ``cuts`` kills with a ``ground`` that cuts the
    power: tail damage is then the cut's), then catch up and check. A run's live fault comes
    at a random moment of its life, counted as ``lives`` draws it (from its start, from the
    moment it streams from the source, or from its first batch applied)."""
    print(f"\nsoak (seed {seed}): starting, {seconds:g} s; SOAK_SEED={seed} replays it", flush=True)
    rng, rng_anchors = random.Random(seed), random.Random(f"{seed} anchors")
    live_faults, tail_damage = Deck(LIVE_FAULTS, rng), Deck(TAIL_DAMAGE, rng)
    anchors = Deck(lives.anchors, rng_anchors)
    source: MariaDBSandbox = sandbox_factory().start()  # type: ignore[operator]
    database = f"soak_{seed}"  # the session's warehouse is shared: a database per seed
    workload = ShopWorkload(source, database, seed=seed).create()
    source.execute(DEVICES.format(db=database))
    cutting = ground is not None and ground.cutting
    folder = ground.folder("soak") if ground is not None else tmp_path
    folder.mkdir(exist_ok=True)
    state = folder / "state"
    result = SoakResult()
    injected = result.injected
    mixed = MixedWorkload(workload, ddl_every)
    started = time.monotonic()
    with TcpProxy(target_port=source.port, lifetime_s=seconds + 3600) as proxy:
        config = config_for(
            folder,
            source,
            spark,
            database,
            receiver="max_relay_file_size = 65536\n",
            applier="max_seconds = 1.5\n",
            port=proxy.port,
            target=None if ground is None else ground.lake(spark),
        )
        if ground is not None:
            ground.settle()
        mixed.thread.start()
        deadline = started + seconds
        try:
            while (
                time.monotonic() < deadline
                or (every_kind and not _every_kind(injected))
                or result.cuts < cuts
            ):
                err_path = tmp_path / f"run{result.kills}.err"
                with err_path.open("w") as err:
                    process = subprocess.Popen(
                        replicate_command(config),
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        text=True,
                        env=replicate_env(),
                        start_new_session=cutting,  # a process group: the JVM dies with it
                    )
                life = rng.uniform(*lives.life_s)
                fault = live_faults.deal() if rng.random() < fault_odds else None
                anchor = anchors.deal()
                if anchor == "applied":
                    life = rng_anchors.uniform(*lives.applied_s)
                wait_for(anchor, err_path, process, result)
                if fault is not None:
                    at = rng.uniform(0.0, life)
                    time.sleep(at)
                    inject_live_fault(fault, rng, proxy, source, mixed)
                    injected[fault] += 1
                    life -= at
                time.sleep(max(0.0, life))
                if process.poll() is not None:
                    refusal = typed_refusal(err_path) if result.cuts else None
                    if refusal is None:
                        pytest.fail(
                            f"replicate exited by itself (rc={process.returncode}) after "
                            f"{dict(injected)} (seed {seed}):\n{err_path.read_text()[-6000:]}"
                        )
                    result.refused.append(refusal)
                    if len(result.refused) > MAX_REFUSALS:
                        pytest.fail(f"{len(result.refused)} refusals: {result.refused}")
                    continue
                if cutting:
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    process.send_signal(signal.SIGKILL)
                process.wait()
                result.landed[kill_class(err_path.read_text(errors="replace"))] += 1
                if cutting:
                    assert ground is not None
                    cut = ground.crash(
                        tear=rng.choice(POWER_CUT_TEARS), seed=rng.randrange(1 << 30)
                    )
                    result.cuts += 1
                    print(f"power cut {result.cuts} ({result.describe()}): {cut}", flush=True)
                elif rng.random() < tear_odds:
                    shape = tail_damage.deal()
                    if damage_after_kill(shape, state):
                        injected[f"torn_tail_{shape}"] += 1
        finally:
            mixed.stop.set()
            mixed.thread.join()
        assert not mixed.errors, mixed.errors
        # An ALTER's column changes reach Iceberg with the table's next rows (its TABLE_MAP):
        # end with rows on every table, so that no DDL is still pending when verify compares.
        workload.run(3)
        mixed._device()
        # What the killed runs left unapplied (most of it on a loaded machine, where Spark's
        # start takes much of a short run): up to the soak's own length to catch up, as it
        # ran (a run of ``cuts`` has no ``seconds``: 200 cuts left a backlog of an hour that
        # took longer than 15 minutes to apply).
        final_log = tmp_path / "final.err"
        ran = time.monotonic() - started
        final = catch_up(config, final_log, timeout=max(900.0, seconds, ran))
        assert final == 0, (
            f"final catch-up rc={final} (seed {seed}):\n{final_log.read_text()[-8000:]}"
        )
        checked = assert_verify_passes(config, spark)
        history = assert_history_is_exactly_once(config, spark)
    faults = ", ".join(f"{kind} {count}" for kind, count in sorted(injected.items())) or "none"
    elapsed = time.monotonic() - started
    print(
        f"\nsoak (seed {seed}): {elapsed / 60:.1f} minutes, {result.describe()}; "
        f"{sum(injected.values())} faults: {faults}; "
        f"{workload.next_id - 1} orders, {mixed.ddl_done} DDL statements; "
        f"verify passed for {len(checked)} tables, {sum(history.values())} binlake snapshots, "
        "each batch and position once: nothing lost, nothing doubled",
        flush=True,
    )
    return result


def typed_refusal(err_path: Path) -> str | None:
    """A run's stop with a typed error (its "error:" line, when a "hint:" line follows), or
    None (a traceback, or no error at all)."""
    printed = err_path.read_text(errors="replace")
    errors = re.findall(r"^error: .*$", printed, re.MULTILINE)
    if not errors or "\nhint: " not in printed or "Traceback" in printed:
        return None
    return errors[-1]


def kill_class(printed: str) -> str:
    """Where a run was when it died, from what it printed (the module docstring's classes)."""
    if any(int(count.replace(",", "")) > 0 for count in _ROW_CHANGES.findall(printed)):
        return "applying"
    return "receiving" if "streaming from" in printed else "starting"


#: What a run prints once it has reached an anchor of ``Lives``, and the longest wait for it.
_REACHED: dict[str, tuple[Callable[[str], bool], float]] = {
    "streaming": (lambda printed: "streaming from" in printed, STREAMING_WAIT_S),
    "applied": (lambda printed: kill_class(printed) == "applying", APPLIED_WAIT_S),
}


def wait_for(
    anchor: str, err_path: Path, process: subprocess.Popen[str], result: SoakResult
) -> None:
    """Until ``process`` has reached ``anchor`` (or exited, or waited its longest): the time it
    took goes into ``result.waited``."""
    if anchor not in _REACHED:
        return
    reached, longest = _REACHED[anchor]
    started = time.monotonic()
    while time.monotonic() < started + longest and process.poll() is None:
        if reached(err_path.read_text(errors="replace")):
            result.waited[anchor].append(time.monotonic() - started)
            return
        time.sleep(0.1)


def _every_kind(injected: Counter[str]) -> bool:
    kinds = {*LIVE_FAULTS, *(f"torn_tail_{shape}" for shape in TAIL_DAMAGE)}
    return kinds <= set(injected)
