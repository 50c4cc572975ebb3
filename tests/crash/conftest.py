"""Fixtures of the crash tests: ``ground``, where a test keeps what it kills, and the power-cut
mount it uses in ``cut`` mode (tests/crash/cut_modes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cut_modes import CUT, KILL, Ground, skip_without_fuse

from binlake_dev.powercut import PowerCutMount


@pytest.fixture(scope="module")
def power_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PowerCutMount]:
    """One power-cut mount for a test module (started on first use)."""
    skip_without_fuse()
    base = tmp_path_factory.mktemp("powercut")
    (base / "backing").mkdir()
    with PowerCutMount(base / "backing", base / "mnt") as mount:
        yield mount


@pytest.fixture
def ground(request: pytest.FixtureRequest, tmp_path: Path) -> Ground:
    """``kill`` unless parametrised (indirectly) with ``cut``."""
    mode = getattr(request, "param", KILL)
    mount = request.getfixturevalue("power_mount") if mode == CUT else None
    return Ground(mode, tmp_path, mount)
