"""The password binlake sends: the UTF-8 bytes of ``password_env``'s text, a ``password_file``'s
bytes as they are less one trailing newline; never shown (issue 17)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from binlake.config import Secret, load_config
from binlake.errors import SourceAuthError
from binlake.source.errmap import map_pymysql_error
from binlake.source.settings import ConnectionSettings, connect_args, connection_settings

NON_ASCII = "pässwörd-ü €"
CONFIG = """\
[source]
host = "127.0.0.1"
port = 3306
user = "repl"
server_id = 4242
{password}
[state]
dir = "state"
"""


def config_with(tmp_path: Path, password_line: str, env: dict[str, str] | None = None) -> object:
    path = tmp_path / "binlake.toml"
    path.write_text(CONFIG.format(password=password_line), "utf-8")
    return load_config(path, env or {})


def sent_password(config: object) -> bytes:
    settings = connection_settings(config.source)  # type: ignore[attr-defined]
    password = connect_args(settings)["password"]
    assert isinstance(password, bytes)
    return password


def test_a_non_ascii_password_from_the_environment_is_sent_as_its_utf8_bytes(
    tmp_path: Path,
) -> None:
    config = config_with(tmp_path, 'password_env = "PW"', {"PW": NON_ASCII})
    assert sent_password(config) == NON_ASCII.encode("utf-8")
    assert sent_password(config) != NON_ASCII.encode("latin-1", "replace")


def test_undecodable_environment_bytes_are_sent_as_they_were(tmp_path: Path) -> None:
    raw = b"caf\xe9-latin1"  # what os.environ holds for it: surrogate escapes
    text = os.fsdecode(raw)
    config = config_with(tmp_path, 'password_env = "PW"', {"PW": text})
    assert sent_password(config) == raw


def test_a_password_file_is_sent_as_its_bytes_less_one_trailing_newline(tmp_path: Path) -> None:
    for content, expected in (
        (NON_ASCII.encode() + b"\n", NON_ASCII.encode()),
        (NON_ASCII.encode() + b"\r\n", NON_ASCII.encode()),
        (NON_ASCII.encode() + b"\n\n", NON_ASCII.encode() + b"\n"),
        (b"  spaced  ", b"  spaced  "),
        (b"\xff\xfe not utf-8", b"\xff\xfe not utf-8"),
        (b"\n", b""),
        (b"", b""),
    ):
        (tmp_path / "pw").write_bytes(content)
        config = config_with(tmp_path, 'password_file = "pw"')
        assert sent_password(config) == expected, content


def test_no_password_source_sends_an_empty_password(tmp_path: Path) -> None:
    assert sent_password(config_with(tmp_path, "")) == b""


def test_connection_settings_take_text_as_its_utf8_bytes() -> None:
    settings = ConnectionSettings("127.0.0.1", 3306, "u", NON_ASCII, 7)
    assert settings.password == NON_ASCII.encode()
    assert NON_ASCII not in repr(settings) and NON_ASCII not in str(settings)


def test_a_non_ascii_secret_never_shows_in_repr_or_str() -> None:
    secret = Secret(NON_ASCII)
    for text in (repr(secret), str(secret), f"{secret}", f"{secret!r}"):
        assert NON_ASCII not in text and "********" in text
    assert secret == Secret(NON_ASCII.encode()) and secret.reveal() == NON_ASCII.encode()


def test_an_ed25519_account_without_pynacl_is_an_auth_error_naming_the_package() -> None:
    settings = ConnectionSettings("127.0.0.1", 3306, "u", NON_ASCII, 7)
    failure = RuntimeError("'pynacl' package is required for ed25519_password auth method")
    error = map_pymysql_error(failure, settings, during="connect")
    assert isinstance(error, SourceAuthError)
    assert "PyNaCl" in error.hint and error.user == "u"
    assert NON_ASCII not in f"{error} {error.hint} {error.fields()}"


@pytest.mark.parametrize("line", ['password_env = "PW"', 'password_file = "pw"'])
def test_the_non_ascii_password_is_in_no_config_repr(tmp_path: Path, line: str) -> None:
    (tmp_path / "pw").write_text(NON_ASCII + "\n", "utf-8")
    config = config_with(tmp_path, line, {"PW": NON_ASCII})
    for text in (repr(config), str(config), repr(connection_settings(config.source))):  # type: ignore[attr-defined]
        assert NON_ASCII not in text
