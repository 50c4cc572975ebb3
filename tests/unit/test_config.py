"""The config file: typed sections, every bad field named, environment overrides, and a
password that never shows up in a repr, a message or an error."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from binlake.config import (
    Config,
    ReplicationMode,
    Secret,
    SyncPolicy,
    describe_keys,
    load_config,
)
from binlake.errors import ConfigError
from binlake.source.settings import connection_settings
from binlake.storage.lock import lock_state_folder

SECRET = "pa$$-w0rd-never-printed"
BASE = """
[source]
host = "db.example"
user = "repl"
server_id = 4242
password_env = "TEST_BINLAKE_PASSWORD"
[state]
dir = "./binlake-state"
"""
DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "binlake.toml"
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str, **env: str) -> Config:
    return load_config(write(tmp_path, text), {"TEST_BINLAKE_PASSWORD": SECRET, **env})


def test_a_minimal_config_gets_the_documented_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, BASE)
    assert config.source.port == 3306
    assert config.source.mode is ReplicationMode.GTID
    assert config.source.heartbeat_period_s == 5.0
    assert config.source.connect_timeout_s == 10.0
    assert config.source.ssl_verify is True and config.source.ssl_ca is None
    assert config.source.password is not None and config.source.password.reveal() == SECRET.encode()
    assert config.receiver.sync is SyncPolicy.GROUPED
    assert config.receiver.sync_interval_ms == 50
    assert config.receiver.sync_max_transactions == 1000
    assert config.receiver.max_relay_file_size == 128 * 1024 * 1024
    assert config.receiver.reconnect_max_attempts == 0


def test_relative_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load(tmp_path, BASE)
    assert config.state.dir == tmp_path / "binlake-state"
    assert config.state.relay_dir == tmp_path / "binlake-state" / "relay"
    assert config.state.source_state_path.name == "source.state"
    assert config.state.checkpoint_path.name == "relay.checkpoint"
    with lock_state_folder(config.state.dir) as lock:  # the state folder's lock is <dir>/lock
        assert lock.path.name == "lock"
        assert lock.path.parent == config.state.dir


BAD_VALUES = [
    ("source", "port", '"3306x"', "source.port"),
    ("source", "port", "0", "source.port"),
    ("source", "port", "70000", "source.port"),
    ("source", "port", "true", "source.port"),
    ("source", "port", "3306.5", "source.port"),
    ("source", "server_id", "0", "source.server_id"),
    ("source", "server_id", "4294967296", "source.server_id"),
    ("source", "host", '""', "source.host"),
    ("source", "user", "7", "source.user"),
    ("source", "mode", '"binlog"', "source.mode"),
    ("source", "heartbeat_period_s", "0", "source.heartbeat_period_s"),
    ("source", "heartbeat_period_s", "5000000", "source.heartbeat_period_s"),
    ("source", "connect_timeout_s", "-1", "source.connect_timeout_s"),
    ("source", "ssl_verify", "3", "source.ssl_verify"),
    ("source", "ssl_ca", '"/no/such/ca.pem"', "source.ssl_ca"),
    ("source", "ssl_cert", '"/etc/hostname"', "source.ssl_key"),
    ("receiver", "sync", '"sometimes"', "receiver.sync"),
    ("receiver", "sync_interval_ms", "0", "receiver.sync_interval_ms"),
    ("receiver", "sync_max_transactions", "0", "receiver.sync_max_transactions"),
    ("receiver", "max_relay_file_size", "100", "receiver.max_relay_file_size"),
    ("receiver", "reconnect_initial_s", '"soon"', "receiver.reconnect_initial_s"),
    ("receiver", "reconnect_max_attempts", "-1", "receiver.reconnect_max_attempts"),
    ("receiver", "catch_up_give_up_s", "0", "receiver.catch_up_give_up_s"),
]


def with_value(section: str, key: str, value: str) -> str:
    if section != "source":
        return BASE + f"[{section}]\n{key} = {value}\n"
    if re.search(rf"^{key} = ", BASE, flags=re.MULTILINE):
        return re.sub(rf"^{key} = .*$", f"{key} = {value}", BASE, flags=re.MULTILINE)
    return BASE.replace("[source]\n", f"[source]\n{key} = {value}\n")


@pytest.mark.parametrize(("section", "key", "value", "field"), BAD_VALUES)
def test_a_bad_value_is_a_config_error_naming_its_field(
    tmp_path: Path, section: str, key: str, value: str, field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, with_value(section, key, value))
    assert caught.value.field == field
    assert field.split(".")[1] in str(caught.value)
    assert caught.value.exit_code == 78


def test_reconnect_max_below_initial_is_refused(tmp_path: Path) -> None:
    text = BASE + "[receiver]\nreconnect_initial_s = 5\nreconnect_max_s = 1\n"
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    assert caught.value.field == "receiver.reconnect_max_s"


@pytest.mark.parametrize(
    ("remove", "field"),
    [
        ('host = "db.example"\n', "source.host"),
        ("server_id = 4242\n", "source.server_id"),
        ('dir = "./binlake-state"\n', "state.dir"),
    ],
)
def test_a_missing_required_key_is_named(tmp_path: Path, remove: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, BASE.replace(remove, ""))
    assert caught.value.field == field
    assert "missing" in str(caught.value)


def test_a_missing_section_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, BASE.split("[state]")[0])
    assert caught.value.field == "state"


def test_an_unknown_key_is_an_error_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, BASE.replace("[source]\n", "[source]\nprot = 3307\n"))
    assert caught.value.field == "source.prot"
    assert "port" in caught.value.hint


def test_an_unknown_section_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, BASE + "[recever]\nsync = 'grouped'\n")
    assert caught.value.field == "recever"
    assert "[receiver]" in caught.value.hint


def test_a_section_that_is_a_value_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, "receiver = 3\n" + BASE)
    assert caught.value.field == "receiver"


def test_invalid_toml_and_missing_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(tmp_path, "[source\n")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", {})


def test_both_password_sources_are_refused(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text(SECRET)
    text = BASE.replace("[source]\n", '[source]\npassword_file = "pw"\n')
    with pytest.raises(ConfigError, match="both password_env and password_file") as caught:
        load(tmp_path, text)
    assert caught.value.field == "source.password_env"


def test_password_file_contents_lose_one_trailing_newline(tmp_path: Path) -> None:
    (tmp_path / "pw").write_bytes(SECRET.encode() + b"  \n")
    text = BASE.replace('password_env = "TEST_BINLAKE_PASSWORD"', 'password_file = "pw"')
    config = load(tmp_path, text)
    assert config.source.password == Secret(SECRET + "  ")
    assert config.source.password_origin == f"file {tmp_path / 'pw'}"


def test_an_unreadable_password_file_is_named_without_its_contents(tmp_path: Path) -> None:
    text = BASE.replace('password_env = "TEST_BINLAKE_PASSWORD"', 'password_file = "missing"')
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    assert caught.value.field == "source.password_file"


def test_an_unset_password_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TEST_BINLAKE_PASSWORD") as caught:
        load_config(write(tmp_path, BASE), {})
    assert caught.value.field == "source.password_env"


def test_no_password_source_means_an_empty_password(tmp_path: Path) -> None:
    config = load(tmp_path, BASE.replace('password_env = "TEST_BINLAKE_PASSWORD"\n', ""))
    assert config.source.password is None
    assert config.source.password_origin == "none"


def test_environment_variables_override_each_key(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE,
        BINLAKE_SOURCE_HOST="override.example",
        BINLAKE_SOURCE_PORT="3307",
        BINLAKE_SOURCE_MODE="file",
        BINLAKE_SOURCE_SSL_VERIFY="false",
        BINLAKE_STATE_DIR="elsewhere",
        BINLAKE_RECEIVER_SYNC="every-transaction",
        BINLAKE_RECEIVER_SYNC_INTERVAL_MS="10",
        BINLAKE_RECEIVER_RECONNECT_MAX_S="2.5",
    )
    assert config.source.host == "override.example"
    assert config.source.port == 3307
    assert config.source.mode is ReplicationMode.FILE
    assert config.source.ssl_verify is False
    assert config.state.dir == Path.cwd() / "elsewhere"
    assert config.receiver.sync is SyncPolicy.EVERY_TRANSACTION
    assert config.receiver.sync_interval_ms == 10
    assert config.receiver.reconnect_max_s == 2.5


def test_a_bad_environment_override_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, BASE, BINLAKE_SOURCE_PORT="thirty")
    assert caught.value.field == "source.port"


def test_an_environment_variable_naming_no_key_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="BINLAKE_SOURCE_PROT") as caught:
        load(tmp_path, BASE, BINLAKE_SOURCE_PROT="3307")
    assert caught.value.field == "source"


def test_the_password_variable_itself_may_use_the_binlake_prefix(tmp_path: Path) -> None:
    text = BASE.replace("TEST_BINLAKE_PASSWORD", "BINLAKE_SOURCE_PASSWORD")
    config = load_config(write(tmp_path, text), {"BINLAKE_SOURCE_PASSWORD": SECRET})
    assert config.source.password == Secret(SECRET)


def test_the_password_appears_in_no_repr_str_or_error(tmp_path: Path) -> None:
    config = load(tmp_path, BASE)
    settings = connection_settings(config.source)
    assert settings.password == SECRET.encode()
    for text in (repr(config), str(config), repr(config.source), repr(settings), str(settings)):
        assert SECRET not in text
    assert SECRET not in repr(config.source.password) and SECRET not in str(config.source.password)
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, BASE.replace("[source]\n", "[source]\nport = 'x'\n"))
    error = caught.value
    assert SECRET not in f"{error} {error.hint} {error.fields()}"
    with pytest.raises(TypeError):
        pickle.dumps(config.source.password)


def test_docs_list_every_key_with_its_environment_variable() -> None:
    text = DOCS.read_text("utf-8")
    for name, _kind, _default, env_var, _doc in describe_keys():
        section, key = name.split(".")
        assert f"`{key}`" in text and f"`{env_var}`" in text, name
        assert f"[{section}]" in text
