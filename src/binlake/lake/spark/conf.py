"""The running Spark session's configuration, read for what errors must name: the catalog's
warehouse (a full disk), its uri (a catalog that failed), the master.

``running_conf`` asks the active ``SparkContext``; the rest is pure, on a configuration
mapping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pyspark import SparkContext

_WAREHOUSE_KEY = re.compile(r"spark\.sql\.catalog\.[^.]+\.warehouse")
_URI_KEY = re.compile(r"spark\.sql\.catalog\.([^.]+)\.uri")


def configured_warehouse(conf: Mapping[str, str]) -> str | None:
    """The catalog warehouse a Spark configuration names, if it names exactly one."""
    found = {value for key, value in conf.items() if _WAREHOUSE_KEY.fullmatch(key)}
    return found.pop() if len(found) == 1 else None


def configured_catalog_uri(conf: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(catalog, uri) of the one catalog with a ``uri`` a Spark configuration names, if it
    names exactly one."""
    found = {(m.group(1), value) for key, value in conf.items() if (m := _URI_KEY.fullmatch(key))}
    return found.pop() if len(found) == 1 else (None, None)


#: The configuration of the context read last: a ``SparkContext``'s configuration does not
#: change once it runs, and reading it whole is hundreds of Py4J round trips.
_read: tuple[SparkContext, dict[str, str]] | None = None


def running_conf() -> dict[str, str]:
    """The running session's Spark configuration ({} when none runs, or the JVM is gone)."""
    global _read
    context = SparkContext._active_spark_context
    if context is None:
        return {}
    known = _read
    if known is not None and known[0] is context:
        return dict(known[1])
    try:
        conf = dict(context.getConf().getAll())
    except Exception:  # the JVM may already be gone; the error is still typed without it
        return {}
    _read = (context, conf)
    return dict(conf)


def session_warehouse() -> str | None:
    """The warehouse of the running session's catalog, when known."""
    return configured_warehouse(running_conf())
