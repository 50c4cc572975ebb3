"""The lake target's pieces without Spark: ``[catalog]`` and the new ``[spark]`` keys, the JDBC
catalog's Spark keys (the password never among them), catalog and master failures read from
Java cause chains, master URLs, the direct reader's uri parsing, the namespaces check-target
probes, and the exit codes of the new errors."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from binlake.binlog.names import TableName
from binlake.config import CatalogType, Config, load_config
from binlake.errors import (
    CatalogAuthError,
    CatalogCommitUnknownError,
    CatalogConfigError,
    CatalogUnreachableError,
    ConfigError,
    SparkMasterError,
    SparkMasterUnreachableError,
    SparkNoExecutorsError,
    TargetError,
)
from binlake.lake.catalog.failures import classify_catalog_failure, classify_master_failure
from binlake.lake.catalog.jdbc import JdbcCatalogReader, postgres_address
from binlake.lake.catalog.target import lake_target, redact_url
from binlake.lake.schema.sql import create_table_statements
from binlake.lake.spark.cluster import check_master_address, master_addresses
from binlake.lake.spark.errors import classify_spark_failure
from binlake.lake.spark.session import spark_settings, startup_conf
from binlake.lake.spark.target_check import target_namespaces, warehouse_folder
from binlake.storage.warehouse_sync import local_warehouse
from binlake.typemap import IcebergType, LakeColumn, LakeSchema

BASE = """
[source]
host = "db.example"
user = "repl"
server_id = 4242
[state]
dir = "./state"
"""
JDBC = """
[catalog]
type = "jdbc"
uri = "jdbc:postgresql://pg.internal:5432/lake"
user = "binlake"
password_env = "LAKE_CATALOG_PASSWORD"
warehouse = "lakehouse"
"""
SECRET = "s3cret-catalog-pw"


def load(tmp_path: Path, text: str, **env: str) -> Config:
    path = tmp_path / "binlake.toml"
    path.write_text(BASE + text)
    return load_config(path, env)


# ---- [catalog] -----------------------------------------------------------------------------


def test_without_a_catalog_section_the_target_is_the_embedded_catalog(tmp_path: Path) -> None:
    config = load(tmp_path, "")
    assert config.catalog.type is CatalogType.EMBEDDED and not config.catalog.is_jdbc
    target = lake_target(config)
    assert target.embedded and not target.hadoop
    assert target.jdbc is None and target.secret_conf == {}
    hadoop = lake_target(load(tmp_path, '[catalog]\ntype = "hadoop"\n'))
    assert hadoop.embedded and hadoop.hadoop


def test_a_jdbc_catalog_becomes_spark_keys_and_a_secret_set_after_start(tmp_path: Path) -> None:
    config = load(tmp_path, JDBC, LAKE_CATALOG_PASSWORD=SECRET)
    assert config.catalog.is_jdbc and config.catalog.warehouse == (tmp_path / "lakehouse").as_uri()
    assert config.catalog.password_origin == "environment variable LAKE_CATALOG_PASSWORD"
    target = lake_target(config)
    assert not target.embedded
    prefix = "spark.sql.catalog.lake"
    assert target.spark_conf[f"{prefix}.type"] == "jdbc"
    assert target.spark_conf[f"{prefix}.uri"] == "jdbc:postgresql://pg.internal:5432/lake"
    assert target.spark_conf[f"{prefix}.jdbc.user"] == "binlake"
    assert target.spark_conf[f"{prefix}.jdbc.schema-version"] == "V1"
    assert target.spark_conf[f"{prefix}.jdbc.socketTimeout"] == "60"  # never 0: never forever
    assert target.spark_conf[f"{prefix}.jdbc.connectTimeout"] == "10"
    assert target.spark_conf[f"{prefix}.cache-enabled"] == "false"
    assert {k: v.reveal_text() for k, v in target.secret_conf.items()} == {
        f"{prefix}.jdbc.password": SECRET
    }
    settings = spark_settings(target)
    conf = startup_conf(settings)
    assert SECRET not in repr(conf) and SECRET not in repr(settings) and SECRET not in repr(config)
    assert f"{prefix}.jdbc.password" not in conf, "the builder's conf is the JVM's command line"


def test_mysql_catalog_databases_get_their_timeouts_in_milliseconds(tmp_path: Path) -> None:
    text = JDBC.replace("jdbc:postgresql://pg.internal:5432/lake", "jdbc:mysql://m:3306/lake")
    target = lake_target(load(tmp_path, text, LAKE_CATALOG_PASSWORD=SECRET))
    assert target.spark_conf["spark.sql.catalog.lake.jdbc.socketTimeout"] == "60000"
    assert "spark.sql.catalog.lake.jdbc.loginTimeout" not in target.spark_conf


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (JDBC.replace('uri = "jdbc:postgresql://pg.internal:5432/lake"\n', ""), "catalog.uri"),
        (JDBC.replace('warehouse = "lakehouse"\n', ""), "catalog.warehouse"),
        (JDBC.replace("jdbc:postgresql:", "postgresql:"), "catalog.uri"),
        (JDBC + "socket_timeout_s = 0\n", "catalog.socket_timeout_s"),
        (JDBC + 'password_file = "pw"\n', "catalog.password_env"),
        ('[catalog]\nuri = "jdbc:postgresql://h/db"\n', "catalog.uri"),
        (JDBC + '[spark.conf]\n"spark.sql.catalog.lake.type" = "rest"\n', "spark.conf"),
        (JDBC + 'schema_version = "V2"\n', "catalog.schema_version"),
    ],
)
def test_a_wrong_catalog_section_is_a_config_error_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text, LAKE_CATALOG_PASSWORD=SECRET)
    assert caught.value.field == field, caught.value
    assert SECRET not in f"{caught.value} {caught.value.hint}"


def test_the_catalog_password_comes_from_a_file_or_a_named_variable_only(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text(SECRET + "\n")
    from_file = load(
        tmp_path, JDBC.replace('password_env = "LAKE_CATALOG_PASSWORD"', 'password_file = "pw"')
    )
    assert (
        from_file.catalog.password is not None
        and from_file.catalog.password.reveal_text() == SECRET
    )
    with pytest.raises(ConfigError, match="LAKE_CATALOG_PASSWORD, which is not set"):
        load(tmp_path, JDBC)
    named = JDBC.replace("LAKE_CATALOG_PASSWORD", "BINLAKE_CATALOG_PW")
    config = load(tmp_path, named, BINLAKE_CATALOG_PW=SECRET)  # not taken for a typo'd override
    assert config.catalog.password is not None
    with pytest.raises(ConfigError, match="BINLAKE_CATALOG_URL names no key"):
        load(tmp_path, JDBC, LAKE_CATALOG_PASSWORD=SECRET, BINLAKE_CATALOG_URL="x")


def test_spark_jars_master_ui_and_executor_wait_are_read(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        '[spark]\nmaster = "spark://m:7077"\njars = ["drivers/pg.jar", "hdfs://nn/x.jar"]\n'
        'master_ui = "http://m:8080"\nexecutor_wait_s = 15\n',
    )
    assert config.spark.jars == (str(tmp_path / "drivers" / "pg.jar"), "hdfs://nn/x.jar")
    target = lake_target(config)
    settings = spark_settings(target)
    assert settings.master_ui == "http://m:8080" and settings.executor_wait_s == 15.0
    assert startup_conf(settings)["spark.jars"].endswith("drivers/pg.jar,hdfs://nn/x.jar")


@pytest.mark.parametrize("kind", ["hadoop", "embedded"])
def test_an_embedded_catalog_refuses_jdbc_keys(tmp_path: Path, kind: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, f'[catalog]\ntype = "{kind}"\nuser = "x"\n')
    assert caught.value.field == "catalog.user"


def test_a_local_jdbc_warehouse_is_fsynced_like_the_embedded_one(tmp_path: Path) -> None:
    target = lake_target(load(tmp_path, JDBC, LAKE_CATALOG_PASSWORD=SECRET))
    assert local_warehouse(target) == tmp_path / "lakehouse"
    assert warehouse_folder(target) == tmp_path / "lakehouse"
    remote = JDBC.replace('warehouse = "lakehouse"', 'warehouse = "s3a://bucket/lake"')
    target = lake_target(load(tmp_path, remote, LAKE_CATALOG_PASSWORD=SECRET))
    assert local_warehouse(target) is None and warehouse_folder(target) is None
    assert JdbcCatalogReader.for_target(target) is None  # status goes through Spark then


def test_check_target_probes_the_namespaces_the_config_names(tmp_path: Path) -> None:
    text = '[tables]\ninclude = ["shop.*", "crm.customer", "*.audit", "mysql.user"]\n'
    text += '[target]\nnamespace_map = { crm = "lake_crm", hr = "people" }\n'
    assert target_namespaces(lake_target(load(tmp_path, text))) == ["lake_crm", "people", "shop"]
    assert target_namespaces(lake_target(load(tmp_path, ""))) == []


# ---- failures read from Java cause chains ----------------------------------------------------

URI = "jdbc:postgresql://127.0.0.1:5432/lake?password=oops"
CHAINS = {
    "org.apache.iceberg.jdbc.UncheckedSQLException: Failed to connect: jdbc:postgresql://h/lake\n"
    'org.postgresql.util.PSQLException: FATAL: password authentication failed for user "binlake"': (
        CatalogAuthError,
        'password authentication failed for user "binlake"',
    ),
    "org.apache.iceberg.jdbc.UncheckedSQLException: Failed to connect\n"
    'org.postgresql.util.PSQLException: FATAL: database "nosuchdb" does not exist': (
        CatalogConfigError,
        'database "nosuchdb" does not exist',
    ),
    "org.apache.iceberg.jdbc.UncheckedSQLException: Failed to connect\n"
    "java.sql.SQLException: No suitable driver found for jdbc:postgres://h/lake": (
        CatalogConfigError,
        "No suitable driver found for jdbc:postgres://h/lake",
    ),
    "org.apache.iceberg.jdbc.UncheckedSQLException: Failed to connect\n"
    "org.postgresql.util.PSQLException: Connection to 127.0.0.1:5 refused. Check that the "
    "hostname and port are correct\njava.net.ConnectException: Connection refused": (
        CatalogUnreachableError,
        "Connection to 127.0.0.1:5 refused",
    ),
    "org.apache.iceberg.jdbc.UncheckedSQLException: Failed to get table db.t from catalog lake\n"
    "org.postgresql.util.PSQLException: FATAL: terminating connection due to administrator "
    "command": (CatalogUnreachableError, "terminating connection due to administrator command"),
    "org.postgresql.util.PSQLException: An I/O error occurred while sending to the backend.\n"
    "java.net.SocketTimeoutException: Read timed out": (
        CatalogUnreachableError,
        "An I/O error occurred while sending to the backend.",
    ),
    "org.apache.iceberg.exceptions.CommitStateUnknownException: Datacenter on fire": (
        CatalogCommitUnknownError,
        "may or may not have landed",
    ),
}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_catalog_failures_are_typed_with_the_drivers_words_and_no_java(chain: str) -> None:
    expected, words = CHAINS[chain]
    error = classify_spark_failure(f"py4j error\n{chain}", "MERGE INTO t", "db.t", uri=URI)
    assert type(error) is expected and words in str(error), error
    assert "org.postgresql" not in str(error) and "java." not in str(error)
    assert error.fields()["uri"] == "jdbc:postgresql://127.0.0.1:5432/lake?password=***"
    assert error.table == "db.t" and error.hint


def test_a_network_error_outside_the_catalog_is_not_a_catalog_error() -> None:
    chain = "org.apache.spark.SparkException: Job aborted\njava.net.SocketTimeoutException: x"
    assert classify_catalog_failure(chain) is None
    assert type(classify_spark_failure(chain)).__name__ == "SparkStatementError"


def test_master_failures_from_spark_are_typed() -> None:
    stopped = "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext."
    assert isinstance(
        classify_master_failure(stopped, master="spark://m:1"), SparkMasterUnreachableError
    )
    parse = "org.apache.spark.SparkException: Could not parse Master URL: 'spark:/x'"
    error = classify_master_failure(parse, master="spark:/x")
    assert type(error) is SparkMasterError and error.master == "spark:/x"
    assert classify_spark_failure(stopped, master="spark://m:1").hint


def test_redact_url_masks_a_password_parameter() -> None:
    assert redact_url("jdbc:postgresql://h/db?user=a&password=x&ssl=true") == (
        "jdbc:postgresql://h/db?user=a&password=***&ssl=true"
    )


# ---- masters ----------------------------------------------------------------------------------


def test_master_urls_are_parsed_with_standby_masters() -> None:
    assert master_addresses("spark://a:7077,b:7078,c") == [("a", 7077), ("b", 7078), ("c", 7077)]
    for bad in ("spark:/127.0.0.1", "yarn", "spark://:7077", "spark://h:port", "spark://h/x"):
        with pytest.raises(SparkMasterError):
            master_addresses(bad)


def test_an_unreachable_master_is_typed_in_well_under_a_second() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(SparkMasterUnreachableError, match="Connection refused") as caught:
        check_master_address(f"spark://127.0.0.1:{port}")
    assert time.monotonic() - started < 1.0
    assert caught.value.master == f"spark://127.0.0.1:{port}" and caught.value.retryable
    check_master_address("local[2]")  # nothing to check before Spark starts


def test_the_new_errors_exit_codes() -> None:
    expected = {
        CatalogAuthError: 77, CatalogConfigError: 78, CatalogUnreachableError: 69,
        CatalogCommitUnknownError: 75, SparkMasterError: 78, SparkMasterUnreachableError: 69,
        SparkNoExecutorsError: 69, TargetError: 73,
    }  # fmt: skip
    for cls, code in expected.items():
        assert cls.exit_code == code, cls


# ---- the direct reader -----------------------------------------------------------------------


def test_only_plain_postgresql_uris_are_read_without_spark() -> None:
    plain = postgres_address("jdbc:postgresql://pg:6432/lake?user=u&password=p&socketTimeout=5")
    assert plain is not None and (plain.host, plain.port, plain.database) == ("pg", 6432, "lake")
    assert (plain.user, plain.password) == ("u", "p")
    default = postgres_address("jdbc:postgresql://pg/lake")
    assert default is not None and default.port == 5432
    for other in (
        "jdbc:postgresql://a:1,b:2/lake",
        "jdbc:postgresql://pg/lake?ssl=true",
        "jdbc:mysql://m/lake",
        "jdbc:postgresql:lake",
    ):
        assert postgres_address(other) is None, other


# ---- [tables.layout] ------------------------------------------------------------------------

LAYOUT = """[tables.layout."shop.orders"]
partition = ["days(created_at)", "bucket(16, id)", "truncate(4, `na me`)", "region"]
sort = ["customer_id", "created_at DESC NULLS LAST"]
"""


def test_a_layout_becomes_partition_and_sort_clauses_of_the_created_table(tmp_path: Path) -> None:
    target = lake_target(load(tmp_path, LAYOUT))
    layout = target.layouts[TableName("shop", "orders")]
    assert [f.sql for f in layout.partition] == [
        "days(`created_at`)",
        "bucket(16, `id`)",
        "truncate(4, `na me`)",
        "`region`",
    ]
    names = ("id", "created_at", "na me", "region", "customer_id")
    columns = tuple(LakeColumn(n, i, "INT", IcebergType.INT) for i, n in enumerate(names))
    orders = TableName("shop", "orders")
    statements = create_table_statements("t", LakeSchema(orders, columns, ("id",)), layout=layout)
    assert "PARTITIONED BY (days(`created_at`), bucket(16, `id`)" in statements[0]
    assert statements[-1] == (
        "ALTER TABLE t WRITE ORDERED BY `customer_id` ASC, `created_at` DESC NULLS LAST"
    )
    with pytest.raises(ConfigError) as caught:  # a column the source table does not have
        create_table_statements("t", LakeSchema(orders, columns[:2], ("id",)), layout=layout)
    assert caught.value.field == 'tables.layout."shop.orders".partition'


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('partition = ["weeks(at)"]', 'tables.layout."shop.orders".partition'),
        ('partition = ["bucket(id)"]', 'tables.layout."shop.orders".partition'),
        ('partition = ["bucket(0, id)"]', 'tables.layout."shop.orders".partition'),
        ('sort = ["at SIDEWAYS"]', 'tables.layout."shop.orders".sort'),
        ('partition = "days(at)"', 'tables.layout."shop.orders".partition'),
        ('order = ["id"]', 'tables.layout."shop.orders"'),
    ],
)
def test_a_bad_layout_is_refused_naming_its_key(tmp_path: Path, body: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, f'[tables.layout."shop.orders"]\n{body}\n')
    assert caught.value.field == field
