"""``[cuts]``: how often ``binlake replicate`` records a consistent cut and which cuts it keeps
(``binlake.apply.cuts``, ``binlake.cuts``; docs/configuration.md lists every key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from binlake.config.section import Section, setting
from binlake.config.values import DAY_S, bool_value, float_value, int_value, str_value, where
from binlake.errors import ConfigError

__all__ = ["CutsConfig"]


def _table_name(value: object, name: str, base: Path) -> str:
    text = str_value()(value, name, base)
    namespace, dot, table = text.partition(".")
    if not dot or not namespace.strip() or not table.strip() or "." in table:
        raise ConfigError(f"{where(name)} must be namespace.table (one dot)", field=name)
    return text


@dataclass(frozen=True, kw_only=True)
class CutsConfig(Section):
    """``[cuts]``: consistent cuts (docs/architecture.md, "Consistent cuts")."""

    #: Record cuts at all.
    enabled: bool = setting("bool", bool_value, True, "record consistent cuts while replicating")
    #: Record a cut at most every this many seconds (0: after every batch).
    every_s: float = setting(
        "float",
        float_value(0.0, 86_400.0, low_open=False),
        5.0,
        "record a cut at most every this many seconds (after the batch that ends the "
        "interval, or once idle); 0 = after every batch",
    )
    #: The Iceberg table the cuts are recorded in: ``namespace.table`` in the target catalog.
    table: str = setting(
        "str",
        _table_name,
        "binlake.cuts",
        "the Iceberg table (namespace.table, in the target catalog) the cuts are recorded in",
    )
    #: Retention: the newest ``keep_last`` cuts, and the first cut of every ``keep_every_s``
    #: interval for ``keep_for_s``.
    keep_last: int = setting("int", int_value(1, 1_000_000), 100, "keep the newest this many cuts")
    keep_every_s: float = setting(
        "float",
        float_value(1.0, 3650 * DAY_S, low_open=False),
        3600.0,
        "also keep the oldest cut of every interval this long...",
    )
    keep_for_s: float = setting(
        "float",
        float_value(0.0, 3650 * DAY_S, low_open=False),
        7 * DAY_S,
        "...for this long (older cuts beyond keep_last are removed)",
    )

    @property
    def identifier(self) -> tuple[str, str]:
        namespace, _, name = self.table.partition(".")
        return namespace, name
