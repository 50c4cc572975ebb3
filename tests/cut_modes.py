"""The two ways a crash test crashes (issue #38): ``kill`` (the process SIGKILLed at its crash
point: the page cache keeps every write) and ``cut`` (the same kill, then the power cut on the
power-cut file system, ``binlake_dev.powercut``: every write not fsynced is gone, the newest one
torn at a ``tear`` boundary, then the folder is mounted again with no stale cache).

A test takes the ``ground`` fixture (tests/conftest.py), parametrised indirectly over
``CUT_MODES``, makes its folders with ``ground.folder``, makes its setup durable with
``ground.settle`` and calls ``ground.crash`` once the killed process is gone.

A test that writes a lake takes its target from ``ground.lake(spark)``: in ``cut`` mode an
embedded catalog of its own (``cutlake<N>``) whose warehouse, ``catalog.sqlite`` with it, is on
the mount too, so a cut also drops what the JVM (Iceberg's files) and SQLite did not fsync. The
test's own Spark session reads and writes that catalog as well; its connections to the database
are closed before each cut and at the end of the test (``release``), so that the session's
next statement opens the database again on the fresh mount. After a cut the catalog is
prepared as binlake's next start prepares it (before the test reads it).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import pytest

from binlake.lake.catalog.embedded import embedded_catalog_conf, prepare_embedded_catalog
from binlake_dev.powercut import CutReport, PowerCutMount, unavailable_reason
from lake_targets import TargetSetup

KILL = "kill"
CUT = "cut"
#: kill -9 as before; kill -9 then a power cut (marked ``powercut``: ``make power-cut`` runs
#: every such case, ``make test`` those not also marked ``slow``).
CUT_MODES = (KILL, pytest.param(CUT, marks=pytest.mark.powercut))
_folders = itertools.count()
_lakes = itertools.count()


def crash_cases(points: Iterable[str], *, slow: Collection[str] = ()) -> list[Any]:
    """``(point, mode)`` parameters for each point in both modes (ids ``point-mode``; ``ground``
    indirect); the power-cut case of a point in ``slow`` is left to ``make power-cut``."""
    cases = []
    for point in points:
        cases.append(pytest.param(point, KILL, id=f"{point}-{KILL}"))
        marks = [pytest.mark.powercut, *([pytest.mark.slow] if point in slow else [])]
        cases.append(pytest.param(point, CUT, id=f"{point}-{CUT}", marks=marks))
    return cases


def skip_without_fuse() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"the power-cut file system cannot run here: {reason}")


class Ground:
    """Where a crash test keeps what it kills: a plain folder (``kill``) or one under a
    power-cut mount (``cut``)."""

    def __init__(self, mode: str, tmp_path: Path, mount: PowerCutMount | None) -> None:
        self.mode = mode
        self._tmp_path = tmp_path
        self._mount = mount
        self.cuts: list[CutReport] = []
        #: The embedded catalogs ``lake`` added to a Spark session: (session, name, warehouse).
        self._lakes: list[tuple[Any, str, Path]] = []

    @property
    def cutting(self) -> bool:
        return self._mount is not None

    def folder(self, name: str) -> Path:
        """A new folder ``name`` (not created under the mount's root directly: each test has a
        folder of its own there), durable."""
        if self._mount is None:
            return self._tmp_path / name
        own = self._mount.mount / f"t{next(_folders)}"
        own.mkdir()
        self._mount.sync_all()
        return own / name

    def lake(self, spark: Any) -> TargetSetup | None:
        """The lake target of the test's binlake config: None (the session's warehouse) in
        ``kill`` mode; in ``cut`` mode an embedded catalog of its own, its warehouse under the
        mount, added to the session ``spark`` (see the module doc)."""
        if self._mount is None:
            return None
        name = f"cutlake{next(_lakes)}"
        warehouse = self.folder("warehouse")
        prepare_embedded_catalog(warehouse, name)
        for key, value in embedded_catalog_conf(name, warehouse).items():
            spark.conf.set(key, value)
        self._lakes.append((spark, name, warehouse))
        self.settle()
        return TargetSetup("embedded", name, warehouse=warehouse)

    def release(self) -> None:
        """The sessions' catalogs on the mount closed (their database connections) and
        forgotten: the next statement that names one loads it again."""
        for spark, name, _ in self._lakes:
            release_catalog(spark, name)

    def settle(self) -> None:
        """What the test wrote so far is durable (its setup, before the process it kills)."""
        if self._mount is not None:
            self._mount.sync_all()

    def crash(self, tear: int | None = 512, seed: int | None = None) -> CutReport | None:
        """After the kill: in ``cut`` mode the power goes (everything unsynced dropped, the newest
        unsynced write torn at ``tear``) and comes back (a fresh mount), and the test's lakes are
        prepared as binlake's next start would (a table commit the cut took back set back:
        ``binlake.lake.catalog.lost_commits``). The report, or None."""
        if self._mount is None:
            return None
        self.release()
        report = self._mount.power_cut(tear=tear, seed=seed)
        self.cuts.append(report)
        for _, name, warehouse in self._lakes:  # what every binlake command does first
            prepare_embedded_catalog(warehouse, name)
        return report


def release_catalog(spark: Any, name: str) -> None:
    """Close the Iceberg catalog ``name`` of the session ``spark`` (when loaded) and drop it
    from Spark's catalog manager, which has no API for that: its ``catalogs`` map, by
    reflection."""
    manager = spark._jsparkSession.sessionState().catalogManager()
    field = manager.getClass().getDeclaredField("catalogs")
    field.setAccessible(True)
    loaded = field.get(manager)
    if loaded.contains(name):
        loaded.apply(name).icebergCatalog().close()
        loaded.remove(name)
