"""Which crash points have a power-cut test (issue #38): the point's kill -9 test also runs in
``cut`` mode (tests/cut_modes.py: kill -9, then everything not fsynced dropped and the newest
unsynced write torn). Each point of ``crashpoints.POINTS`` must be run so by a test listed
here: a new crash point without a power-cut test fails."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import test_applier_crash
import test_checkpoint_crash
import test_embedded_catalog_crash
import test_key_index_crash
import test_maintain_crash
import test_receiver_crash
import test_relay_crash
import test_shadow_crash
import test_snapshot_crash

from binlake.crashpoints import POINTS
from cut_modes import CUT


def _power_cut_tests() -> list[tuple[Callable[..., Any], Iterable[str]]]:
    """Each test that runs a crash in ``cut`` mode, with the crash points it reaches."""
    shadow = test_shadow_crash
    return [
        (
            test_relay_crash.test_crash_at_point_then_recovery_loses_nothing_synced,
            test_relay_crash.PASS_THAT_DIES,
        ),
        (
            shadow.test_kill_at_a_shadow_crash_point_leaves_a_committed_state,
            {point for point, _ in shadow.CASES},
        ),
        (
            shadow.test_kill_during_create_leaves_no_file_or_a_whole_one,
            {name for name in POINTS if name.startswith("durable_")},
        ),
        (
            test_checkpoint_crash.test_kill_while_recording_leaves_a_lower_bound_and_recovery_catches_up,
            {point for point, _ in test_checkpoint_crash.CASES},
        ),
        (
            test_embedded_catalog_crash.test_kill_during_adoption_leaves_no_catalog_or_a_whole_one,
            test_embedded_catalog_crash.POINTS,
        ),
        (
            test_receiver_crash.test_receive_killed_at_a_crash_point_then_restarted_equals_the_source,
            test_receiver_crash.PASS_THAT_DIES,
        ),
        (
            test_applier_crash.test_replicate_killed_at_every_apply_crash_point_in_turn_then_restarted_is_exactly_once,
            test_applier_crash.CASES,
        ),
        (
            test_key_index_crash.test_killed_at_each_key_index_step_the_restart_leaves_one_true_index,
            {name for name in POINTS if name.startswith("keyindex_")},
        ),
        (
            test_maintain_crash.test_replicate_killed_before_a_tag_move_leaves_no_tag_and_restarts_exactly_once,
            ["lake_before_tag_move"],
        ),
        (
            test_maintain_crash.test_maintain_killed_after_each_step_in_turn_then_replicated_is_exactly_once,
            [f"maintain_after_{step}" for step in test_maintain_crash.STEPS],
        ),
        (
            test_snapshot_crash.test_a_snapshot_killed_at_every_crash_point_in_turn_resumes_after_its_last_chunk,
            [kill.split(":")[0] for kill in test_snapshot_crash.KILLS] + ["snapshot_after_replace"],
        ),
    ]


def runs_a_power_cut(test: Callable[..., Any]) -> bool:
    """Whether ``test`` is parametrised over ``ground`` with the ``cut`` mode among its cases."""
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, cases = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        if "ground" not in names:
            continue
        at = names.index("ground")
        for case in cases:
            values = getattr(case, "values", case if len(names) > 1 else (case,))
            if values[at] == CUT:
                return True
    return False


def power_cut_points() -> dict[str, list[str]]:
    """Crash point -> the tests that cut the power there."""
    covered: dict[str, list[str]] = {}
    for test, points in _power_cut_tests():
        assert runs_a_power_cut(test), f"{test.__name__} has no cut case"
        for point in points:
            covered.setdefault(point, []).append(f"{test.__module__}::{test.__name__}")
    return covered


def test_every_listed_test_runs_a_power_cut_case() -> None:
    assert all(runs_a_power_cut(test) for test, _ in _power_cut_tests())


def test_every_crash_point_has_a_power_cut_test() -> None:
    covered = set(power_cut_points())
    assert not covered - set(POINTS), "a listed point is not a crash point"
    missing = set(POINTS) - covered
    assert not missing, f"crash points without a power-cut test: {sorted(missing)}"
