"""The two ways a crash test crashes (issue #38): ``kill`` (the process SIGKILLed at its crash
point: the page cache keeps every write) and ``cut`` (the same kill, then the power cut on the
power-cut file system, ``binlake_dev.powercut``: every write not fsynced is gone, the newest one
torn at a ``tear`` boundary, then the folder is mounted again with no stale cache).

A test takes the ``ground`` fixture (tests/conftest.py), parametrised indirectly over
``CUT_MODES``, makes its folders with ``ground.folder``, makes its setup durable with
``ground.settle`` and calls ``ground.crash`` once the killed process is gone.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import pytest

from binlake_dev.powercut import CutReport, PowerCutMount, unavailable_reason

KILL = "kill"
CUT = "cut"
#: kill -9 as before; kill -9 then a power cut (marked ``powercut``: ``make power-cut`` runs
#: every such case, ``make test`` those not also marked ``slow``).
CUT_MODES = (KILL, pytest.param(CUT, marks=pytest.mark.powercut))
_folders = itertools.count()


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

    def settle(self) -> None:
        """What the test wrote so far is durable (its setup, before the process it kills)."""
        if self._mount is not None:
            self._mount.sync_all()

    def crash(self, tear: int | None = 512, seed: int | None = None) -> CutReport | None:
        """After the kill: in ``cut`` mode the power goes (everything unsynced dropped, the newest
        unsynced write torn at ``tear``) and comes back (a fresh mount). The report, or None."""
        if self._mount is None:
            return None
        report = self._mount.power_cut(tear=tear, seed=seed)
        self.cuts.append(report)
        return report
