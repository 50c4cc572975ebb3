"""Running relay_driver.py (and the CLI) as subprocesses, and reading what the driver promised."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from binlake.crashpoints import ENV_VAR
from relay_testing import gtid_seqs

CRASH_DIR = Path(__file__).parent
TESTS_DIR = CRASH_DIR.parent
DRIVER = CRASH_DIR / "relay_driver.py"
TIMEOUT_S = 60


@dataclass
class DriverRun:
    returncode: int
    stdout: str
    stderr: str
    #: (file, offset, seq) for each sync() that returned.
    synced: list[tuple[str, int, int]] = field(default_factory=list)
    purges: list[str] = field(default_factory=list)

    @property
    def killed(self) -> bool:
        return self.returncode == -9

    @property
    def last_synced_seq(self) -> int:
        return self.synced[-1][2] if self.synced else 0

    def describe(self) -> str:
        return f"rc={self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def _env(crash_point: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(ENV_VAR, None)
    if crash_point is not None:
        env[ENV_VAR] = crash_point
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")])
    return env


def run_driver(folder: Path, *args: str, crash_point: str | None = None) -> DriverRun:
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(folder), *args],
        capture_output=True,
        text=True,
        env=_env(crash_point),
        timeout=TIMEOUT_S,
        check=False,
    )
    run = DriverRun(proc.returncode, proc.stdout, proc.stderr)
    for line in proc.stdout.splitlines():
        word, *rest = line.split()
        if word == "synced":
            run.synced.append((rest[0], int(rest[1]), int(rest[2])))
        elif word == "purge":
            run.purges.append(rest[0])
    return run


def run_cli(*args: str, crash_point: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "binlake.cli.main", *args],
        capture_output=True,
        text=True,
        env=_env(crash_point),
        timeout=TIMEOUT_S,
        check=False,
    )


def assert_nothing_synced_lost(folder: Path, run: DriverRun) -> list[int]:
    """Every transaction the driver saw synced survives, unless a purge it announced removed
    its file; the surviving transactions are contiguous. Returns their sequence numbers."""
    seqs = gtid_seqs(folder)
    if seqs:
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"not contiguous: {seqs}"
    if run.synced:
        assert seqs and seqs[-1] >= run.last_synced_seq, (seqs, run.describe())
    purge_limit = run.purges[-1] if run.purges else ""
    for name, offset, seq in run.synced:
        path = folder / name
        if path.exists():
            assert path.stat().st_size >= offset, (name, offset, run.describe())
        else:
            assert name < purge_limit, f"{name} (synced up to seq {seq}) vanished unpurged"
    return seqs
