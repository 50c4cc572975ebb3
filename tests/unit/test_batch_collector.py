"""The applier's garbage collection (``apply.collector``): CPython's automatic collector paused
while an applier runs, what was alive at its start frozen, a cycle left meanwhile collected
between batches once ``every_s`` passed, and the collector as it was at the end."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from binlake.apply.collector import BatchCollector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def a_cycle() -> weakref.ref[Node]:
    """A reference cycle nobody holds: only the cyclic collector frees it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_the_collector_is_paused_and_the_alive_frozen_while_an_applier_runs() -> None:
    gc.enable()
    with BatchCollector():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_cycle_left_during_a_run_goes_at_the_first_collection_due() -> None:
    with BatchCollector(every_s=3600.0) as waiting, BatchCollector(every_s=0.0) as due:
        left = a_cycle()
        waiting.collect_due()
        assert left() is not None and waiting.collections == 0  # not due before every_s
        due.collect_due()
        assert left() is None and due.collections == 1


def test_appliers_of_one_process_share_one_pause_that_the_last_to_end_ends() -> None:
    gc.enable()
    first = BatchCollector()
    with first:
        with BatchCollector():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first still runs
    assert gc.isenabled()


def test_a_collector_off_before_the_applier_stays_off_after_it() -> None:
    gc.disable()
    with BatchCollector():
        pass
    assert not gc.isenabled()
