"""``binlake verify --cut [AT]``: every table compared with the source at the snapshot a
consistent cut names (``binlake.cuts``).

The source cannot be read as of a past position, so the cut's snapshots are compared with the
source's consistent snapshot at its current position S, through the same decision as every
verify (``binlake.verify.plan``) on each table's lineage *cut back to the cut's snapshot*: the
snapshot is compared when the relay log shows no transaction touching the table between the
snapshot's position and S (then its state at the cut's position P, between the two, is its
state at S); otherwise the table waits, as any verify waits for the applier, and fails with a
catch-up timeout. So ``verify --cut`` proves that each table's snapshot in the cut equals the
source, for tables the source has not changed since the cut; run it once writes are stopped
(or on quiet tables) to prove the whole cut. A table pending at the cut is an error; a table
the cut does not hold (no lake table when it was recorded) is compared as an absent table.
"""

from __future__ import annotations

from collections.abc import Callable

from binlake.cuts import Cut
from binlake.errors import CutTableError
from binlake.lake.catalog.metadata import LakeLineage
from binlake.lake.catalog.target import LakeTarget

Lineage = Callable[[tuple[str, ...]], LakeLineage | None]


def lineage_at_cut(lineage: Lineage, target: LakeTarget, cut: Cut) -> Lineage:
    """``lineage`` with each table's snapshots newer than its snapshot in ``cut`` left out."""

    def at_cut(identifier: tuple[str, ...]) -> LakeLineage | None:
        source = target.source_table(identifier)
        name = "" if source is None else f"{source.database}.{source.table}"
        if name in cut.pending:
            cut.table(name)  # raises: no consistent snapshot at the cut
        at = cut.tables.get(name)
        table = lineage(identifier)
        if at is None or table is None:
            return None if at is None else table
        ids = [s.snapshot_id for s in table.lineage]
        if at.snapshot not in ids:
            raise CutTableError(
                f"{name}: snapshot {at.snapshot} of cut {cut.cut_id} is not in the table's "
                "lineage (expired, or the table was replaced since)",
                table=name,
                at=str(cut.cut_id),
                hint="verify a newer cut (binlake verify --cut latest)",
            )
        return LakeLineage(table.identifier, table.lineage[ids.index(at.snapshot) :], False)

    return at_cut
