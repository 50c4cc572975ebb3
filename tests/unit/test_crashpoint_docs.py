"""docs/recovery.md lists every crash point of the registry, and nothing else; the code passes
registered crash points only."""

from __future__ import annotations

import re
from pathlib import Path

from binlake.crashpoints import POINTS
from binlake.maintain.plan import Step

ROOT = Path(__file__).resolve().parents[2]
RECOVERY_DOC = ROOT / "docs" / "recovery.md"


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


def test_every_crash_point_the_code_passes_is_registered() -> None:
    """A disarmed run does not look names up (it passes some once per event), so a misspelt
    name would only show when armed: checked here, on the source text."""
    call = re.compile(r"""\b(?:crash_point|should_crash)\((f?)"([^"]+)"\)""")
    seen: set[str] = set()
    for path in (ROOT / "src" / "binlake").rglob("*.py"):
        for is_format, name in call.findall(path.read_text("utf-8")):
            if is_format:  # the one formatted name: a maintenance step's
                assert name == "maintain_after_{step.value}", (path, name)
                seen |= {f"maintain_after_{step.value}" for step in Step}
            else:
                seen.add(name)
    assert seen <= set(POINTS), sorted(seen - set(POINTS))
    assert len(seen) > 40  # the scan found the calls
