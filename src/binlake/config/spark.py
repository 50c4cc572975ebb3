"""``[spark]``: the Spark master ``binlake replicate`` uses and any Spark/Iceberg setting,
passed through (docs/spark.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from binlake.config.section import Section, setting
from binlake.config.values import float_value, jars_value, spark_conf_value, str_value

__all__ = ["SparkConfig"]


@dataclass(frozen=True, kw_only=True)
class SparkConfig(Section):
    """``[spark]``: the master and any Spark/Iceberg configuration, passed through."""

    master: str = setting(
        "str", str_value(), "local[2]", "the Spark master (local[N], spark://, yarn...)"
    )
    conf: Mapping[str, str] = setting(
        "table",
        spark_conf_value,
        {},
        "any spark.* setting, passed through; wins over binlake's defaults",
    )
    #: Jars for ``spark.jars`` beside the Iceberg runtime (JDBC drivers...).
    jars: tuple[str, ...] = setting(
        "list",
        jars_value,
        (),
        "jars for spark.jars beside the Iceberg runtime (a JDBC driver: "
        "/usr/share/java/postgresql.jar); paths relative to the config file's folder",
    )
    #: The standalone master's web UI (``http://HOST:8080``): lets binlake say why an
    #: application gets no executor.
    master_ui: str | None = setting(
        "str",
        str_value(),
        None,
        "a standalone master's web UI (http://HOST:8080): says why an application gets no executor",
    )
    #: How long a session on a cluster waits for its first executor.
    executor_wait_s: float = setting(
        "float",
        float_value(0.0, 3600.0),
        120.0,
        "on a cluster: longest wait for the first executor before stopping with a typed error",
    )
