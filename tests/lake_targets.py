"""The lake targets the replication tests run against, as a parametrised fixture (``target``):

* ``embedded``: binlake's default, ``local[2]`` Spark and the embedded Hadoop catalog in the
  session's warehouse folder;
* ``jdbc``: ``local[2]`` Spark and Iceberg's JDBC catalog on the session's PostgreSQL
  (``[catalog] type = "jdbc"``), its files in a folder of the session;
* ``cluster-jdbc``: the JDBC catalog from a Spark standalone cluster (master and worker from
  pyspark's distribution, started once per session): ``[spark] master = "spark://..."``.

The JDBC catalog is named ``pglake`` both in binlake's configs and in the tests' own Spark
session (Iceberg's JDBC catalog keys its rows by that name), so a test reads what a
``binlake replicate`` subprocess wrote through its ``spark`` fixture. Tests put the target's
``suffix`` on their database names: the targets share one source server per module.
``register_jdbc_catalog`` adds a JDBC catalog of its own to the running session (the status and
verify tests build their lakes without the applier).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from binlake.config import CatalogConfig, CatalogType, Secret
from binlake.lake.catalog.target import LakeTarget, jdbc_catalog_conf
from binlake_dev.jvm_archive import SHORT_RUN_OPTIONS, driver_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from binlake_dev.cluster import SparkCluster
    from binlake_dev.postgres import PostgresServer

KINDS = ("embedded", "jdbc", "cluster-jdbc")
#: JVM options of every JVM the tests start for Spark: the tests' own session and each binlake
#: subprocess's driver (``SPARK_SUBMIT_OPTS``, set by tests/conftest.py), and the executors on
#: the test cluster (``CLUSTER_CONF``). These JVMs live seconds to minutes, where the C2
#: compiler's threads cost more CPU than its code gains: C1 only and the serial collector make
#: a short Spark run about a third faster on 2 cores. Speed only (no behaviour depends on the
#: JIT tier); bench/ and binlake itself run with the JVM's defaults.
#: The drivers also map the classes of binlake_dev.jvm_archive's archive when it is built.
TEST_JVM_OPTIONS = SHORT_RUN_OPTIONS
#: Catalog name of the session's JDBC catalog (binlake's configs and the tests' session).
JDBC_CATALOG = "pglake"
#: Spark settings of binlake's applications on the test cluster: one core each, so that two
#: run side by side on its 2-core worker (a replicate and a snapshot, or a killed run's
#: successor while the master frees the first one's core).
CLUSTER_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.cores.max": "1",
    "spark.executor.cores": "1",
    "spark.executor.memory": "768m",
    "spark.driver.memory": "768m",
    "spark.executor.extraJavaOptions": driver_options(TEST_JVM_OPTIONS),
}


@dataclass(frozen=True)
class CatalogDatabase:
    """The PostgreSQL database of the session's JDBC catalogs."""

    uri: str
    user: str
    password: str
    password_file: Path
    jar: Path

    def catalog_config(self, warehouse: Path) -> CatalogConfig:
        return CatalogConfig(
            type=CatalogType.JDBC,
            uri=self.uri,
            user=self.user,
            warehouse=warehouse.as_uri(),
            socket_timeout_s=30,
            password=Secret(self.password),
            password_origin=f"file {self.password_file}",
        )

    def section(self, warehouse: Path) -> str:
        """``[catalog]`` for binlake's config file."""
        return (
            "[catalog]\n"
            'type = "jdbc"\n'
            f'uri = "{self.uri}"\n'
            f'user = "{self.user}"\n'
            f'password_file = "{self.password_file}"\n'
            f'warehouse = "{warehouse.as_uri()}"\n'
            "connect_timeout_s = 5\n"
            "socket_timeout_s = 30\n"
        )


def catalog_database(postgres: PostgresServer, folder: Path) -> CatalogDatabase:
    from binlake_dev.postgres import JDBC_JAR

    password_file = folder / "catalog-password"
    password_file.write_text(postgres.password + "\n")
    password_file.chmod(0o600)
    return CatalogDatabase(
        postgres.jdbc_url, postgres.user, postgres.password, password_file, JDBC_JAR
    )


def register_jdbc_catalog(
    spark: SparkSession, database: CatalogDatabase, name: str, warehouse: Path
) -> LakeTarget:
    """A JDBC catalog ``name`` (files in ``warehouse``) added to the running session; the
    ``LakeTarget`` binlake's config would give for it."""
    warehouse.mkdir(parents=True, exist_ok=True)
    config = database.catalog_config(warehouse)
    target = LakeTarget(
        warehouse=warehouse, catalog=name, spark_conf=jdbc_catalog_conf(name, config), jdbc=config
    )
    for key, value in {**target.spark_conf, **target.secret_conf}.items():
        spark.conf.set(key, value if isinstance(value, str) else value.reveal_text())
    return target


@dataclass(frozen=True)
class TargetSetup:
    """One lake target for binlake's config: its sections and its catalog's name."""

    kind: str
    catalog: str
    #: TOML appended to the config: [catalog] and [spark] (nothing for the embedded target).
    sections: str = ""
    #: Put on database names: the targets of a test share its module's source server.
    suffix: str = ""
    cluster: SparkCluster | None = None
    #: The warehouse folder when not the session's (an embedded catalog of a test's own).
    warehouse: Path | None = None

    @property
    def embedded(self) -> bool:
        return self.kind == "embedded"


def embedded_target() -> TargetSetup:
    return TargetSetup("embedded", "lake")


def jdbc_target(
    database: CatalogDatabase, warehouse: Path, catalog: str = JDBC_CATALOG
) -> TargetSetup:
    spark = f'[spark]\njars = ["{database.jar}"]\n'
    return TargetSetup("jdbc", catalog, database.section(warehouse) + spark, "_j")


def cluster_target(
    database: CatalogDatabase, warehouse: Path, cluster: SparkCluster
) -> TargetSetup:
    conf = "".join(f'"{key}" = "{value}"\n' for key, value in CLUSTER_CONF.items())
    spark = (
        "[spark]\n"
        f'master = "{cluster.url}"\n'
        f'master_ui = "{cluster.ui}"\n'
        f'jars = ["{database.jar}"]\n'
        "executor_wait_s = 90\n"
        "[spark.conf]\n"
        f"{conf}"
    )
    return TargetSetup(
        "cluster-jdbc", JDBC_CATALOG, database.section(warehouse) + spark, "_c", cluster
    )


#: What no message binlake shows a user may hold: a Java stack frame, a Java class name, a
#: Python traceback.
JAVA_MARKS = ("\tat ", "Traceback", "Exception:", "java.", "org.apache.")


def assert_no_java(text: str) -> None:
    for mark in JAVA_MARKS:
        assert mark not in text, f"{mark!r} in:\n{text}"
