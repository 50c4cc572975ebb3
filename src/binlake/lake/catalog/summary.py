"""What binlake writes into an Iceberg snapshot's summary: the ``binlake.*`` properties.

Each applier commit carries the source position of its batch (``binlake.position``,
``binlake.gtid``, ``binlake.relay``, ``binlake.batch``), so the data and the position become
durable in one atomic commit (seed 004, WL#5125). ``checked_properties`` is the gate every
commit's properties pass: only ``binlake.*`` keys, only text. Other properties binlake writes
live beside their writers' concern (``snapshot_progress``: a copy's progress; ``write_path``:
how a rows commit was written). Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "binlake."


POSITION = "binlake.position"


GTID = "binlake.gtid"


RELAY = "binlake.relay"


BATCH = "binlake.batch"


BINLAKE_KEYS = (POSITION, GTID, RELAY, BATCH)


def checked_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` as a plain dict, refusing keys outside ``binlake.`` and non-text values."""
    out = {}
    for key, value in properties.items():
        if not key.startswith(PREFIX) or len(key) == len(PREFIX):
            raise ValueError(f"snapshot property {key!r} is not a binlake.* key")
        if not isinstance(value, str):
            raise TypeError(f"snapshot property {key} must be text, not {type(value).__name__}")
        out[key] = value
    if not out:
        raise ValueError("a binlake commit needs at least one binlake.* property")
    return out
