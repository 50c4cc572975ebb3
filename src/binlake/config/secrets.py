"""Passwords in the configuration: never in the file, read from an environment variable or a
file, and held in a ``Secret`` whose ``repr`` and ``str`` are masked (it cannot reach a log
line, an error message or a traceback's locals by accident) and which refuses to be pickled.

``read_password`` serves every section with a password (``[source]``, ``[catalog]``): its
``password_env`` names an environment variable, or ``password_file`` a file (one trailing
newline is dropped); never both.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from binlake.errors import ConfigError


class Secret:
    """A password: ``reveal()`` gives it; ``repr``/``str`` never do."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

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
            text = file.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(
                f"[{section}] password_file {file} cannot be read: {reason}",
                field=f"{section}.password_file",
                hint="check the path and its permissions (readable by binlake only)",
            ) from None
        return Secret(text.removesuffix("\n").removesuffix("\r")), f"file {file}"
    return None, "none"
