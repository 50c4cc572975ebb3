"""Passwords in the configuration: never in the file, read from an environment variable or a
file, and held in a ``Secret`` whose ``repr`` and ``str`` are masked (it cannot reach a log
line, an error message or a traceback's locals by accident) and which refuses to be pickled.

``read_password`` serves every section with a password (``[source]``, ``[catalog]``): its
``password_env`` names an environment variable (its text is taken as UTF-8 bytes), or
``password_file`` a file (its bytes as they are, less one trailing newline); never both. A
``Secret`` holds bytes: the bytes a MySQL/MariaDB server hashed for ``CREATE USER ...
IDENTIFIED BY`` from a utf8mb4 client (PyMySQL would send a ``str`` as latin-1). Where a
password must be text (the JDBC catalog's, a Spark conf or pg8000 value), ``reveal_text()``
decodes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from binlake.errors import ConfigError


class Secret:
    """A password as the bytes sent to the server: ``reveal()`` gives them; ``repr``/``str``
    never do. Text is taken as its UTF-8 bytes."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes | str) -> None:
        self._value = value if isinstance(value, bytes) else text_bytes(value)

    def reveal(self) -> bytes:
        return self._value

    def reveal_text(self) -> str:
        """The password as text, for a client that takes only text (the JDBC catalog's)."""
        return self._value.decode("utf-8", "surrogateescape")

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is not picklable")


def read_password(
    section: str,
    env_name: str | None,
    file: Path | None,
    env: Mapping[str, str],
    *,
    whose: str = "the replication user's",
) -> tuple[Secret | None, str]:
    """The password ``[section]`` points at, and where it came from for messages ("environment
    variable X", "file F", "none")."""
    if env_name is not None and file is not None:
        raise ConfigError(
            f"[{section}] sets both password_env and password_file",
            field=f"{section}.password_env",
            hint="keep one of them: the password comes from one place only",
        )
    if env_name is not None:
        value = env.get(env_name)
        if value is None:
            raise ConfigError(
                f"[{section}] password_env names the environment variable {env_name}, "
                "which is not set",
                field=f"{section}.password_env",
                hint=f"export {env_name} with {whose} password",
            )
        return Secret(value), f"environment variable {env_name}"
    if file is not None:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"[{section}] password_file {file} cannot be read: {exc.strerror}",
                field=f"{section}.password_file",
                hint="check the path and its permissions (readable by binlake only)",
            ) from None
        return Secret(without_trailing_newline(data)), f"file {file}"
    return None, "none"


def text_bytes(text: str) -> bytes:
    """The UTF-8 bytes of ``text``; an environment value's undecodable bytes (which Python
    keeps as surrogate escapes) come back as they were."""
    return text.encode("utf-8", "surrogateescape")


def without_trailing_newline(data: bytes) -> bytes:
    """``data`` less one trailing newline (``\\n`` or ``\\r\\n``), as editors end a file."""
    if data.endswith(b"\r\n"):
        return data[:-2]
    return data.removesuffix(b"\n")
