"""``[target]``: where ``binlake replicate`` puts the Iceberg tables (docs/configuration.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from binlake.config.section import Section, setting
from binlake.config.values import namespace_map_value, path_value, str_value

__all__ = ["TargetConfig"]


@dataclass(frozen=True, kw_only=True)
class TargetConfig(Section):
    """``[target]``: where the Iceberg tables go."""

    #: Folder of the embedded catalog (unused when [spark] conf defines the catalog); the
    #: default, a relative path, lies beside the config file.
    warehouse: Path = setting(
        "path",
        path_value,
        Path("warehouse"),
        "folder of the embedded catalog; default: warehouse/ beside the config file",
    )
    #: The Spark catalog name binlake writes to.
    catalog: str = setting("str", str_value(), "lake", "the Spark catalog binlake writes to")
    #: Source database -> Iceberg namespace (one level); unlisted: the same name.
    namespace_map: Mapping[str, str] = setting(
        "table",
        namespace_map_value,
        {},
        "source database -> Iceberg namespace (one level); unlisted: the same name",
    )

    def namespace(self, database: str) -> str:
        return self.namespace_map.get(database, database)
