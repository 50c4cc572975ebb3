"""docs/recovery.md lists every crash point of the registry, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from binlake.crashpoints import POINTS

RECOVERY_DOC = Path(__file__).resolve().parents[2] / "docs" / "recovery.md"


def documented_points() -> list[str]:
    """The first cell of each row of the crash point table."""
    text = RECOVERY_DOC.read_text("utf-8")
    table = text.split("| crash point | what it interrupts | test |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE)


def test_recovery_doc_lists_exactly_the_registered_crash_points() -> None:
    names = documented_points()
    assert len(names) == len(set(names)), "a crash point is listed twice"
    assert set(names) == set(POINTS)


def test_every_documented_crash_point_names_a_test() -> None:
    text = RECOVERY_DOC.read_text("utf-8")
    for name in POINTS:
        row = re.search(rf"^\| `{name}` \|[^|]+\|(?P<test>[^\n]+)\|$", text, flags=re.MULTILINE)
        assert row is not None and "test_" in row["test"], name
