"""Spark session settings, error recognition and commit properties, without starting Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.errors import SparkSetupError, SparkStatementError
from binlake.lake.catalog.summary import BINLAKE_KEYS, checked_properties
from binlake.lake.spark.errors import spark_error
from binlake.lake.spark.runtime import cache_root, find_java
from binlake.lake.spark.session import (
    ICEBERG_CATALOG,
    ICEBERG_EXTENSIONS,
    SparkSettings,
    brings_own_iceberg,
    startup_conf,
)

JARS = (Path("/cache/iceberg-runtime.jar"), Path("/cache/jackson.jar"))


@pytest.mark.parametrize("hadoop", [False, True], ids=["sqlite", "hadoop"])
def test_embedded_default_is_a_sqlite_catalog_in_the_warehouse(
    tmp_path: Path, hadoop: bool
) -> None:
    conf = startup_conf(SparkSettings(warehouse=tmp_path / "wh", hadoop=hadoop), JARS)
    assert conf["spark.sql.catalog.lake"] == ICEBERG_CATALOG
    if hadoop:
        assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    else:  # Iceberg's JDBC catalog on <warehouse>/catalog.sqlite, tables created by binlake
        assert conf["spark.sql.catalog.lake.type"] == "jdbc"
        assert conf["spark.sql.catalog.lake.uri"] == f"jdbc:sqlite:{tmp_path}/wh/catalog.sqlite"
        assert conf["spark.sql.catalog.lake.jdbc.init-catalog-tables"] == "false"
    assert conf["spark.sql.catalog.lake.cache-enabled"] == "false"  # other writers: never stale
    assert conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "wh")
    assert conf["spark.sql.extensions"] == ICEBERG_EXTENSIONS
    assert conf["spark.jars"] == "/cache/iceberg-runtime.jar,/cache/jackson.jar"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert "log4j2.configurationFile" in conf["spark.driver.extraJavaOptions"]


def test_a_configured_catalog_is_passed_through_untouched() -> None:
    rest = {
        "spark.sql.catalog.lake": ICEBERG_CATALOG,
        "spark.sql.catalog.lake.type": "rest",
        "spark.sql.catalog.lake.uri": "http://127.0.0.1:8181",
        "spark.sql.session.timeZone": "Europe/Paris",
    }
    conf = startup_conf(SparkSettings(master="spark://127.0.0.1:7077", conf=rest), JARS)
    assert {k: conf[k] for k in rest} == rest
    assert "spark.sql.catalog.lake.warehouse" not in conf


def test_user_extensions_and_java_options_keep_ours_beside_theirs() -> None:
    settings = SparkSettings(
        conf={
            "spark.sql.extensions": "com.example.Ext",
            "spark.driver.extraJavaOptions": "-Xss4m",
        }
    )
    conf = startup_conf(settings)
    assert conf["spark.sql.extensions"] == f"{ICEBERG_EXTENSIONS},com.example.Ext"
    assert conf["spark.driver.extraJavaOptions"].endswith(" -Xss4m")


@pytest.mark.parametrize(
    ("settings", "own"),
    [
        (SparkSettings(), False),
        (SparkSettings(jars=("/opt/mariadb-java-client.jar",)), False),
        (SparkSettings(jars=("/opt/iceberg-spark-runtime-3.5_2.12-1.10.0.jar",)), True),
        (
            SparkSettings(packages=("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0",)),
            True,
        ),
        (
            SparkSettings(
                conf={
                    "spark.jars.packages": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.9.2"
                }
            ),
            True,
        ),
    ],
)
def test_the_cached_runtime_is_used_unless_the_config_brings_one(
    settings: SparkSettings, own: bool
) -> None:
    assert brings_own_iceberg(settings) is own


def test_user_jars_come_after_the_cached_runtime() -> None:
    settings = SparkSettings(jars=("/opt/driver.jar",), conf={"spark.jars": "/opt/other.jar"})
    assert startup_conf(settings, JARS)["spark.jars"].split(",") == [
        *map(str, JARS),
        "/opt/driver.jar",
        "/opt/other.jar",
    ]


def test_missing_java_is_a_setup_error_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkSetupError) as caught:
        find_java()
    assert caught.value.component == "java"
    assert "openjdk-17-jre-headless" in caught.value.hint


def test_cache_folder_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BINLAKE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "binlake"
    monkeypatch.setenv("BINLAKE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


# The first lines of what Spark raises when the PyPI runtime lacks its shaded Jackson (measured).
UNREPAIRED = (
    "An error occurred while calling o37.sql.\n"
    ": java.lang.NoClassDefFoundError: "
    "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder\n"
    "\tat org.apache.iceberg.util.JsonUtil.<clinit>(JsonUtil.java:47)\n"
)


def test_missing_shaded_jackson_is_recognised_and_explained() -> None:
    error = spark_error(RuntimeError(UNREPAIRED), "CREATE TABLE lake.db.t (id INT)")
    assert isinstance(error, SparkSetupError)
    assert error.component == "iceberg-jackson"
    assert "make spark-deps" in error.hint


def test_other_spark_errors_keep_their_first_line_and_the_statement() -> None:
    text = (
        "An error occurred while calling o9.sql.\n: org.apache.spark.SparkException: boom\n\tat x"
    )
    error = spark_error(RuntimeError(text), "MERGE INTO   lake.db.t\n USING v", table="lake.db.t")
    assert isinstance(error, SparkStatementError)
    assert error.message == "org.apache.spark.SparkException: boom"
    assert (error.statement, error.table) == ("MERGE INTO lake.db.t USING v", "lake.db.t")


def test_commit_properties_are_binlake_keys_with_text_values() -> None:
    assert checked_properties(dict.fromkeys(BINLAKE_KEYS, "x")) == dict.fromkeys(BINLAKE_KEYS, "x")
    with pytest.raises(ValueError, match="not a binlake"):
        checked_properties({"spark.app.id": "x"})
    with pytest.raises(TypeError, match="text"):
        checked_properties({"binlake.batch": 7})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="at least one"):
        checked_properties({})
