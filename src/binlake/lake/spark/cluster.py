"""A Spark standalone master as binlake meets it: is it there, and did the application get an
executor. What plain Spark does instead is slow or silent:

* a master address nothing listens on: ``getOrCreate`` retries registration three times 20 s,
  then hands back a *stopped* context, and the first job fails with an unrelated
  ``IllegalStateException``. ``check_master_address`` TCP-connects first: a refused or unknown
  address is a ``SparkMasterUnreachableError`` in milliseconds;
* a malformed URL (``spark:/host``) is a Java ``SparkException`` from the JVM:
  ``master_addresses`` refuses it first, as a ``SparkMasterError``;
* no worker with the free cores or memory the application asks for: the application registers
  and every job then waits forever (Spark's only sign is a WARN after
  ``spark.starvation.timeout``). ``wait_for_executors`` waits at most ``[spark]
  executor_wait_s`` for the first executor, then raises ``SparkNoExecutorsError`` saying why
  from the master's JSON page (``[spark] master_ui``) when it is known.

Only ``spark://`` masters are checked (YARN, Kubernetes and ``local`` are left to Spark).
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from binlake.errors import SparkMasterError, SparkMasterUnreachableError, SparkNoExecutorsError

__all__ = [
    "check_master_address",
    "executor_count",
    "is_standalone",
    "master_addresses",
    "master_state",
    "wait_for_executors",
]

DEFAULT_MASTER_PORT = 7077
CONNECT_TIMEOUT_S = 3.0
POLL_S = 0.1


def is_standalone(master: str) -> bool:
    return master.startswith("spark:")


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a ``spark://`` URL (a standby list is comma-separated)."""
    if not master.startswith("spark://"):
        raise SparkMasterError(f"not a standalone master URL: {master!r}", master=master)
    out = []
    for part in master.removeprefix("spark://").split(","):
        parsed = urlparse(f"spark://{part}")
        try:
            port = parsed.port or DEFAULT_MASTER_PORT
        except ValueError:
            raise SparkMasterError(f"bad port in master URL {master!r}", master=master) from None
        if not parsed.hostname or parsed.path not in ("", "/"):
            raise SparkMasterError(f"no host:port in master URL {master!r}", master=master)
        out.append((parsed.hostname, port))
    return out


def check_master_address(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ``SparkMasterUnreachableError`` unless some address of a ``spark://`` master
    accepts TCP connections (``SparkMasterError`` for a malformed URL)."""
    if not is_standalone(master):
        return
    problems = []
    for host, port in master_addresses(master):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except socket.gaierror as error:
            problems.append(f"{host}: unknown host ({error.strerror})")
        except OSError as error:
            problems.append(f"{host}:{port}: {error.strerror or error}")
    raise SparkMasterUnreachableError(
        f"no Spark master answers at {master}: {'; '.join(problems)}", master=master
    )


def master_state(ui: str, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The master's JSON status page (``<ui>/json/``); None when nothing answers there."""
    try:
        with urllib.request.urlopen(ui.rstrip("/") + "/json/", timeout=timeout_s) as reply:
            data = json.loads(reply.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def executor_count(spark: SparkSession) -> int:
    """Executors registered with the driver (the driver itself not counted)."""
    return int(spark.sparkContext._jsc.sc().getExecutorIds().size())


def wait_for_executors(
    spark: SparkSession, *, master: str, master_ui: str | None, timeout_s: float
) -> int:
    """The number of executors once at least one registered; ``SparkNoExecutorsError`` after
    ``timeout_s`` without one."""
    started = time.monotonic()
    while True:
        count = executor_count(spark)
        if count > 0:
            return count
        waited = time.monotonic() - started
        if waited >= timeout_s:
            raise _no_executors(spark, master, master_ui, waited)
        time.sleep(POLL_S)


def _no_executors(
    spark: SparkSession, master: str, master_ui: str | None, waited: float
) -> SparkNoExecutorsError:
    app_id = spark.sparkContext.applicationId
    state = master_state(master_ui) if master_ui else None
    app: dict[str, Any] = {}
    free: int | None = None
    detail = " (set [spark] master_ui for the master's view)"
    if state is not None:
        app = next((a for a in state.get("activeapps", []) if a.get("id") == app_id), {})
        alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
        free = sum(int(w.get("coresfree", 0)) for w in alive)
        memory = max((int(w.get("memoryfree", 0)) for w in alive), default=0)
        detail = (
            f"; the master lists {len(alive)} alive worker(s) with {free} free core(s) and at "
            f"most {memory} MiB free memory; the application asks "
            f"{app.get('memoryperslave', '?')} MiB per executor and is "
            f"{app.get('state', 'unknown')}"
        )
    return SparkNoExecutorsError(
        f"no executor started for application {app_id} within {waited:.0f} s{detail}",
        master=master,
        waited_s=round(waited, 1),
        app_state=app.get("state"),
        free_cores=free,
    )
