"""A round's purge (``binlake.maintain.plan.purged_files``): whichever files Iceberg's plan meets
first, the ones it takes hold at most ``compaction_max_rows`` live rows, unless one file alone
is over it; and it takes as many as that allows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from binlake.maintain.plan import purged_files

ROWS = st.lists(st.integers(min_value=0, max_value=5_000_000), max_size=40)
BOUNDS = st.integers(min_value=1, max_value=20_000_000)


@given(rows=ROWS, bound=BOUNDS, order=st.randoms(use_true_random=False))
def test_any_files_a_purge_may_take_fit_the_bound_or_are_one_file(
    rows: list[int], bound: int, order: object
) -> None:
    files = purged_files(rows, bound)
    met = list(rows)
    order.shuffle(met)  # type: ignore[attr-defined]
    taken = met[:files]
    assert sum(taken) <= bound or len(taken) == 1


@given(rows=ROWS, bound=BOUNDS)
def test_a_purge_takes_as_many_files_as_the_largest_allow(rows: list[int], bound: int) -> None:
    files = purged_files(rows, bound)
    largest = sorted(rows, reverse=True)
    assert files == 0 if not rows else 1 <= files <= len(rows)
    if files < len(rows):  # one more of the largest would be over the bound
        assert sum(largest[: files + 1]) > bound
    if rows and largest[0] <= bound:  # unless the largest alone is over it, all fit
        assert sum(largest[:files]) <= bound
