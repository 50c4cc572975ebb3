"""Spark sessions for binlake: the embedded default, or any cluster and catalog by config.

The embedded default is ``local[2]`` Spark with the embedded catalog (named ``lake``): Iceberg's
JDBC catalog on an SQLite file in a local warehouse folder (``binlake.lake.catalog.embedded``;
``hadoop``: the Hadoop catalog there), Iceberg's SQL extensions, and the Iceberg runtime from
``binlake.lake.spark.runtime``. Anything else is plain passthrough: ``SparkSettings.conf`` goes to
the session as given, so a ``spark.sql.catalog.<name>`` there (REST, Hive, Hadoop on S3/HDFS,
Glue...) replaces the embedded catalog, ``spark.jars.packages`` / ``spark.jars`` naming an
Iceberg runtime replace the cached jars, and any master works.

What binlake sets on every session, unless the configuration sets it: UTC session time zone,
no UI, no console progress bars, quiet Java logs (``log4j2.properties`` beside this module),
few shuffle partitions. ``PYSPARK_PYTHON`` is the running interpreter and ``SPARK_LOCAL_IP``
127.0.0.1 for local masters. Py4J's pinned threads (pyspark's default) are required: snapshot
properties ride in a Java thread-local (``binlake.lake.write.commit``).

Secrets (``secret_conf``: a JDBC catalog's password) are set on the session after it started
(``spark.conf.set``; catalogs read their options when first used): everything on the builder
lands on the driver JVM's command line, which every user of the host sees in ``ps``.

A standalone master (``spark://``) is checked before the JVM starts and after
(``binlake.lake.spark.cluster``): an address nothing answers at, a malformed URL, a master that
never accepts the application, and an application no worker gives an executor are typed
errors, never a hang or a Java stack trace.

One session per process: ``build_session`` refuses to start a second while one runs (pyspark
would silently hand back the first with its old settings). ``stop_session`` stops it and the
Py4J callback server ``binlake.lake.write.commit`` started for it.

``SparkSession`` is re-exported: packages above the lake name the session type through it, so
that pyspark stays an import of this package alone.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark import SparkContext
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from binlake.config import Secret
from binlake.errors import BinlakeError, SparkMasterUnreachableError, SparkSetupError
from binlake.lake.catalog.embedded import (
    embedded_catalog_conf,
    prepare_embedded_catalog,
    refuse_hadoop_on_adopted,
)
from binlake.lake.catalog.failures import classify_master_failure
from binlake.lake.catalog.target import ICEBERG_CATALOG, LakeTarget, hadoop_catalog_conf
from binlake.lake.spark.callbacks import close_callbacks
from binlake.lake.spark.cluster import check_master_address, is_standalone, wait_for_executors
from binlake.lake.spark.errors import first_line, java_causes, missing_class_error
from binlake.lake.spark.runtime import ensure_iceberg_jars, find_java, sqlite_jdbc_jar

__all__ = [
    "ICEBERG_CATALOG",
    "ICEBERG_EXTENSIONS",
    "SparkSession",
    "SparkSettings",
    "brings_own_iceberg",
    "build_session",
    "probe_iceberg",
    "spark_settings",
    "startup_conf",
    "stop_session",
]

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
#: Attempts per task on a local master (``with_task_retries``).
LOCAL_TASK_ATTEMPTS = 4
#: Classes a working Iceberg runtime must provide (the second is what the PyPI jar lacks).
PROBE_CLASSES = (
    ("org.apache.iceberg.spark.SparkCatalog", "iceberg-runtime"),
    ("org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper", "iceberg-jackson"),
)


@dataclass(frozen=True)
class SparkSettings:
    """Everything ``build_session`` needs; ``conf`` is passed through untouched."""

    master: str = "local[2]"
    app_name: str = "binlake"
    #: Folder of the embedded catalog (unused when ``conf`` defines the catalog).
    warehouse: Path = Path("warehouse")
    #: The embedded catalog is the Hadoop catalog (``[catalog] type = "hadoop"``), not SQLite's.
    hadoop: bool = False
    #: The Spark catalog binlake writes to.
    catalog: str = "lake"
    #: Any Spark or Iceberg configuration; wins over every default binlake sets.
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Extra jars for ``spark.jars`` (JDBC drivers, an Iceberg runtime of your own...).
    jars: tuple[str, ...] = ()
    #: Maven coordinates for ``spark.jars.packages`` (needs a reachable Maven repository).
    packages: tuple[str, ...] = ()
    #: Level of Spark's root logger once started (Spark's ``setLogLevel``).
    log_level: str = "ERROR"
    shuffle_partitions: int = 2
    #: Settings that are secrets (a catalog's password): set after the session started.
    secret_conf: Mapping[str, Secret] = field(default_factory=dict)
    #: A standalone master's web UI, to say why no executor came.
    master_ui: str | None = None
    #: On a ``spark://`` master: the longest wait for the first executor.
    executor_wait_s: float = 120.0

    @property
    def is_local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")

    @property
    def embedded_catalog(self) -> bool:
        """True when binlake defines the catalog (in ``warehouse``)."""
        return f"spark.sql.catalog.{self.catalog}" not in self.conf

    @property
    def sqlite_catalog(self) -> bool:
        """True when the catalog is the embedded SQLite one."""
        return self.embedded_catalog and not self.hadoop


def spark_settings(target: LakeTarget, app_name: str = "binlake") -> SparkSettings:
    """The Spark session the target's catalog is read and written through."""
    return SparkSettings(
        master=target.master,
        app_name=app_name,
        warehouse=target.warehouse,
        hadoop=target.hadoop,
        catalog=target.catalog,
        conf=dict(target.spark_conf),
        jars=target.jars,
        secret_conf=target.secret_conf,
        master_ui=target.master_ui,
        executor_wait_s=target.executor_wait_s,
    )


def _user_jars(settings: SparkSettings) -> list[str]:
    out = list(settings.jars)
    out += [j for j in settings.conf.get("spark.jars", "").split(",") if j.strip()]
    return out


def _user_packages(settings: SparkSettings) -> list[str]:
    out = list(settings.packages)
    out += [p for p in settings.conf.get("spark.jars.packages", "").split(",") if p.strip()]
    return out


def brings_own_iceberg(settings: SparkSettings) -> bool:
    """True when the configured jars or packages include an Iceberg Spark runtime."""
    return any("iceberg-spark-runtime" in item for item in _user_jars(settings)) or any(
        "iceberg-spark-runtime" in item for item in _user_packages(settings)
    )


def startup_conf(settings: SparkSettings, iceberg_jars: tuple[Path, ...] = ()) -> dict[str, str]:
    """The full Spark configuration of a session (pure: computes, starts nothing)."""
    conf: dict[str, str] = {
        "spark.app.name": settings.app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}",
        # Snapshot copies run their jobs in a pool of their own beside the applier's
        # statements (binlake.lake.spark.chunk_jobs): a freed core goes to the pool with fewer
        # tasks.
        "spark.scheduler.mode": "FAIR",
    }
    if settings.sqlite_catalog:
        conf.update(embedded_catalog_conf(settings.catalog, settings.warehouse.resolve()))
    elif settings.embedded_catalog:
        conf.update(hadoop_catalog_conf(settings.catalog, settings.warehouse.resolve()))
    jars = [*(str(p) for p in iceberg_jars), *_user_jars(settings)]
    if jars:
        conf["spark.jars"] = ",".join(jars)
    if _user_packages(settings):
        conf["spark.jars.packages"] = ",".join(_user_packages(settings))
    for key, value in settings.conf.items():
        if key in ("spark.jars", "spark.jars.packages"):
            continue
        conf[key] = _merged(key, conf.get(key), value)
    return conf


def _merged(key: str, ours: str | None, theirs: str) -> str:
    """The user's value, keeping Iceberg's extensions and our log config beside theirs."""
    if ours is None or ours == theirs:
        return theirs
    if key == "spark.sql.extensions" and ICEBERG_EXTENSIONS not in theirs:
        return f"{ICEBERG_EXTENSIONS},{theirs}"
    if key == "spark.driver.extraJavaOptions" and "log4j2.configurationFile" not in theirs:
        return f"{ours} {theirs}"
    return theirs


def build_session(settings: SparkSettings) -> SparkSession:
    """Start the Spark session ``settings`` describe, with a working Iceberg runtime (and, on
    a standalone master, an executor).

    Raises ``SparkSetupError`` when Java, the Iceberg runtime or its shaded Jackson classes are
    missing, when a session already runs in this process, or when Spark cannot start;
    ``SparkMasterError`` / ``SparkMasterUnreachableError`` / ``SparkNoExecutorsError`` for a
    standalone master that is malformed, unreachable or has no room for the application."""
    find_java()
    _require_pinned_threads()
    if SparkContext._active_spark_context is not None:
        raise SparkSetupError(
            "a Spark session is already running in this process",
            hint="stop it first (binlake.lake.spark.session.stop_session)",
            component="session",
        )
    check_master_address(settings.master)
    jars: tuple[Path, ...] = () if brings_own_iceberg(settings) else ensure_iceberg_jars().paths
    if settings.sqlite_catalog:
        jars += (sqlite_jdbc_jar(),)
        prepare_embedded_catalog(settings.warehouse.resolve(), settings.catalog)
    elif settings.embedded_catalog:
        refuse_hadoop_on_adopted(settings.warehouse.resolve(), settings.catalog)
    _prepare_environment(settings)
    builder = SparkSession.builder.master(with_task_retries(settings.master))
    for key, value in startup_conf(settings, jars).items():
        builder = builder.config(key, value)
    spark = _get_or_create(builder, settings.master)
    try:
        _check_started(spark, settings)
    except BaseException:
        spark.stop()
        raise
    return spark


def _get_or_create(builder: SparkSession.Builder, master: str) -> SparkSession:
    try:
        return builder.getOrCreate()
    except PySparkException as error:
        raise SparkSetupError(
            f"Spark did not start: {error}",
            hint="check the [spark] settings and that Java 17 runs (`java -version`)",
            component="session",
        ) from None
    except Py4JError as error:  # a Java exception from the JVM (a master URL Spark refuses...)
        text = f"{error}\n{java_causes(error)}"
        typed = classify_master_failure(text, master=master)
        if typed is not None:
            raise typed from None
        raise SparkSetupError(
            f"Spark did not start: {first_line(text)}",
            hint="check the [spark] settings and that Java 17 runs (`java -version`)",
            component="session",
        ) from None


def _check_started(spark: SparkSession, settings: SparkSettings) -> None:
    """What a started session must have: a live context (a master that never accepted the
    application leaves a stopped one), the secrets, the Iceberg runtime, an executor."""
    if spark.sparkContext._jsc.sc().isStopped():
        raise SparkMasterUnreachableError(
            "the Spark master never accepted the application (Spark gave up after its "
            "registration attempts: 'All masters are unresponsive')",
            hint="check that [spark] master is a running standalone master (not another "
            "service on that port) and that this host reaches it",
            master=settings.master,
        )
    spark.sparkContext.setLogLevel(settings.log_level)
    for key, secret in settings.secret_conf.items():
        spark.conf.set(key, secret.reveal_text())
    probe_iceberg(spark)
    if is_standalone(settings.master):
        try:
            wait_for_executors(
                spark,
                master=settings.master,
                master_ui=settings.master_ui,
                timeout_s=settings.executor_wait_s,
            )
        except BinlakeError:
            raise
        except Py4JError as error:
            raise SparkMasterUnreachableError(
                f"the Spark master dropped the application: {first_line(str(error))}",
                master=settings.master,
            ) from None


def with_task_retries(master: str) -> str:
    """A local master that retries failed tasks as a cluster does (``local[N]`` gives each task
    one attempt; ``local[N,F]`` gives it F): a snapshot chunk whose connection was killed is
    read again. Other masters as they are (``spark.task.maxFailures``, 4 by default)."""
    match = re.fullmatch(r"local(?:\[(\d+|\*)\])?", master.strip())
    if match is None:
        return master
    return f"local[{match.group(1) or 1},{LOCAL_TASK_ATTEMPTS}]"


def _require_pinned_threads() -> None:
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() != "true":
        raise SparkSetupError(
            "PYSPARK_PIN_THREAD is off: snapshot properties would not reach Iceberg's commits",
            hint="unset PYSPARK_PIN_THREAD (pyspark pins threads by default)",
            component="py4j",
        )


def _prepare_environment(settings: SparkSettings) -> None:
    if settings.is_local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def probe_iceberg(spark: SparkSession) -> None:
    """Check that the session can load Iceberg's catalog and its shaded Jackson classes."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    for name, component in PROBE_CLASSES:
        try:
            jvm.java.lang.Class.forName(name, False, loader)
        except Exception:
            raise missing_class_error(name, component) from None


def stop_session(spark: SparkSession) -> None:
    """Stop the session and the Py4J callback server started for it (idempotent)."""
    close_callbacks(spark)
    spark.stop()
