"""The applier's config sections: [target], [tables], [spark], [applier]: defaults, parsing,
every bad value named, and lists and tables given through the environment as TOML values."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.binlog.names import TableGlob, TableName
from binlake.config import Config, OnDrop, load_config
from binlake.errors import ConfigError

BASE = """
[source]
host = "db.example"
user = "repl"
server_id = 4242
[state]
dir = "./binlake-state"
"""


def load(tmp_path: Path, text: str, **env: str) -> Config:
    path = tmp_path / "binlake.toml"
    path.write_text(BASE + text)
    return load_config(path, env)


def test_the_applier_sections_are_optional_with_documented_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, "")
    assert config.target.warehouse == tmp_path / "warehouse"
    assert config.target.catalog == "lake"
    assert config.target.namespace("shop") == "shop"
    assert config.tables.include == (TableGlob("*", "*"),) and config.tables.exclude == ()
    assert config.tables.on_drop is OnDrop.KEEP and config.tables.key_columns == {}
    assert config.spark.master == "local[2]" and config.spark.conf == {}
    assert config.applier.max_transactions == 100_000
    assert config.applier.max_bytes == 64 * 1024 * 1024
    assert config.applier.max_seconds == 2.0 and config.applier.metrics_port == 0
    assert config.applier.max_lag_s == 10.0 and config.applier.commit_threads == 4


def test_every_applier_key_is_read(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        """
[target]
warehouse = "lakehouse"
catalog = "ice"
namespace_map = { shop = "lake_shop" }
[tables]
include = ["shop.*", "crm.customer"]
exclude = ["shop.tmp_*"]
on_drop = "drop"
key_columns = { "shop.audit" = ["id", "at"] }
[spark]
master = "local[1]"
[spark.conf]
"spark.driver.memory" = "2g"
"spark.sql.shuffle.partitions" = 4
"spark.sql.adaptive.enabled" = false
[applier]
max_transactions = 500
max_bytes = 1048576
max_seconds = 0.5
metrics_port = 9404
""",
    )
    assert config.target.warehouse == tmp_path / "lakehouse"
    assert config.target.catalog == "ice"
    assert config.target.namespace("shop") == "lake_shop"
    assert config.target.namespace("crm") == "crm"
    assert config.tables.include == (TableGlob("shop", "*"), TableGlob("crm", "customer"))
    assert config.tables.exclude == (TableGlob("shop", "tmp_*"),)
    assert config.tables.on_drop is OnDrop.DROP
    assert config.tables.key_columns == {TableName("shop", "audit"): ("id", "at")}
    assert config.spark.master == "local[1]"
    assert config.spark.conf == {
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.adaptive.enabled": "false",
    }
    assert (config.applier.max_transactions, config.applier.max_bytes) == (500, 1048576)
    assert (config.applier.max_seconds, config.applier.metrics_port) == (0.5, 9404)


def test_lists_and_tables_from_the_environment_are_toml_values(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "",
        BINLAKE_TABLES_INCLUDE='["shop.*"]',
        BINLAKE_TARGET_NAMESPACE_MAP='{ shop = "s" }',
        BINLAKE_SPARK_CONF='{ "spark.driver.memory" = "1g" }',
        BINLAKE_APPLIER_MAX_SECONDS="0.25",
    )
    assert config.tables.include == (TableGlob("shop", "*"),)
    assert config.target.namespace("shop") == "s"
    assert config.spark.conf == {"spark.driver.memory": "1g"}
    assert config.applier.max_seconds == 0.25


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ('[tables]\ninclude = "shop.*"\n', "tables.include", "list of non-empty strings"),
        ("[tables]\ninclude = [1]\n", "tables.include", "list of non-empty strings"),
        ('[tables]\nexclude = ["shop"]\n', "tables.exclude", "does not match db.table"),
        ('[tables]\non_drop = "purge"\n', "tables.on_drop", "not one of keep, drop"),
        ("[tables]\nkey_columns = { audit = ['id'] }\n", "tables.key_columns", "not a db.table"),
        ("[tables]\nkey_columns = { 'a.b' = [] }\n", "tables.key_columns", "non-empty list"),
        ('[tables]\ninclude = ["`we.ird db.*"]\n', "tables.include", "backtick is not closed"),
        ('[tables]\nexclude = ["a.b.c"]\n', "tables.exclude", "not a db.table glob"),
        ('[tables]\ninclude = ["`a`b.*"]\n', "tables.include", "beside a backtick"),
        ("[tables]\nkey_columns = { 'we.ird db.t' = ['id'] }\n", "tables.key_columns", "not a db"),
        ("[applier]\ncommit_retries = -1\n", "applier.commit_retries", "out of range"),
        ("[target]\nnamespace_map = { shop = 'a b' }\n", "target.namespace_map", "must be a name"),
        ("[target]\nnamespace_map = { shop = 'a.b' }\n", "target.namespace_map", "one level"),
        ("[target]\nnamespace_map = ['shop']\n", "target.namespace_map", "TOML table"),
        ("[target]\ncatalog = ''\n", "target.catalog", "must not be empty"),
        ("[spark]\nconf = { 'driver.memory' = '1g' }\n", "spark.conf", "not a Spark setting"),
        ("[spark]\nconf = { 'spark.x' = [1] }\n", "spark.conf", "text or a number"),
        ("[applier]\nmax_transactions = 0\n", "applier.max_transactions", "out of range"),
        ("[applier]\nmax_seconds = -1\n", "applier.max_seconds", "greater than 0"),
        ("[applier]\nmetrics_port = 70000\n", "applier.metrics_port", "out of range"),
        ("[applier]\nmax_batch = 3\n", "applier.max_batch", "unknown key"),
    ],
)
def test_a_bad_applier_value_is_a_config_error_naming_its_field(
    tmp_path: Path, text: str, field: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load(tmp_path, text)
    assert caught.value.field == field and caught.value.hint
    assert caught.value.exit_code == 78


def test_awkward_names_in_globs_and_key_columns_are_pairs(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        '[tables]\ninclude = ["`we.ird db`.*", "Shop.`t``1`"]\n'
        'exclude = ["`we.ird db`.`tmp *`"]\n'
        'key_columns = { "`we.ird db`.`log x`" = ["id"] }\n',
    )
    assert config.tables.include == (TableGlob("we.ird db", "*"), TableGlob("Shop", "t`1"))
    assert config.tables.exclude == (TableGlob("we.ird db", "tmp *"),)
    assert config.tables.key_columns == {TableName("we.ird db", "log x"): ("id",)}


def test_a_list_in_the_environment_that_is_not_toml_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="list of non-empty strings") as caught:
        load(tmp_path, "", BINLAKE_TABLES_INCLUDE="shop.*")
    assert caught.value.field == "tables.include"
    assert '["shop.*"' in caught.value.hint
