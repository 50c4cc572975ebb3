"""The parsers of binlake's configuration: what a key's value goes through, from the TOML file
or from an environment variable's text (``binlake.config.section``'s ``setting`` names one).

Every parser takes ``(value, field name, base folder)`` and returns the typed value or raises a
``ConfigError`` naming the field (``source.port``). Lists and tables given as text (an
environment variable) are read as TOML values: ``BINLAKE_TABLES_INCLUDE='["shop.*"]'``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from binlake.binlog.names import TableGlob, TableName
from binlake.errors import ConfigError

#: Seconds in an hour and in a day, for the keys that count in them.
HOUR_S = 3_600.0
DAY_S = 86_400.0


def where(field_name: str) -> str:
    return f"[{field_name.split('.')[0]}] {field_name.split('.', 1)[1]}"


def str_value(*, allow_empty: bool = False) -> Callable[[object, str, Path], str]:
    def parse(value: object, name: str, _base: Path) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"{where(name)} must be a string", field=name)
        if not allow_empty and not value.strip():
            raise ConfigError(f"{where(name)} must not be empty", field=name)
        if "\0" in value:
            raise ConfigError(f"{where(name)} contains a NUL character", field=name)
        return value

    return parse


def int_value(low: int, high: int) -> Callable[[object, str, Path], int]:
    def parse(value: object, name: str, _base: Path) -> int:
        if isinstance(value, str):
            try:
                value = int(value.strip(), 10)
            except ValueError:
                raise ConfigError(f"{where(name)} must be an integer", field=name) from None
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{where(name)} must be an integer", field=name)
        if not low <= value <= high:
            raise ConfigError(
                f"{where(name)} = {value} is out of range {low}..{high}",
                field=name,
                hint=f"set {name.split('.', 1)[1]} to a value between {low} and {high}",
            )
        return value

    return parse


def float_value(
    low: float, high: float, *, low_open: bool = True
) -> Callable[[object, str, Path], float]:
    def parse(value: object, name: str, _base: Path) -> float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise ConfigError(f"{where(name)} must be a number", field=name) from None
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"{where(name)} must be a number", field=name)
        number = float(value)
        too_low = number <= low if low_open else number < low
        if too_low or number > high or number != number:
            bound = f"greater than {low:g}" if low_open else f"at least {low:g}"
            raise ConfigError(
                f"{where(name)} = {value} must be {bound} and at most {high:g}", field=name
            )
        return number

    return parse


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def bool_value(value: object, name: str, _base: Path) -> bool:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{where(name)} must be true or false", field=name)


def path_value(value: object, name: str, base: Path) -> Path:
    text = str_value()(value, name, base)
    path = Path(text).expanduser()
    return path if path.is_absolute() else base / path


def enum_value(cls: type[StrEnum]) -> Callable[[object, str, Path], Any]:
    def parse(value: object, name: str, _base: Path) -> Any:
        choices = [member.value for member in cls]
        if isinstance(value, str) and value.strip() in choices:
            return cls(value.strip())
        raise ConfigError(
            f"{where(name)} = {value!r} is not one of {', '.join(choices)}", field=name
        )

    return parse


def _toml_text(value: object) -> object:
    """A list or table given as text (an environment variable) is read as a TOML value; text
    that is not one is returned as it is (and refused by the caller's type check)."""
    if not isinstance(value, str):
        return value
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def _text_list(
    value: object, name: str, example: str, *, allow_empty: bool = True
) -> tuple[str, ...]:
    value = _toml_text(value)
    items: list[object] = value if isinstance(value, list) else []
    texts = [v for v in items if isinstance(v, str) and v.strip()]
    if not isinstance(value, list) or len(texts) != len(items) or not (allow_empty or texts):
        raise ConfigError(
            f"{where(name)} must be a {'' if allow_empty else 'non-empty '}list of "
            "non-empty strings",
            field=name,
            hint=f"e.g. {example}",
        )
    return tuple(texts)


def jars_value(value: object, name: str, base: Path) -> tuple[str, ...]:
    """Jar locations: URIs (``hdfs://...``, ``file:...``) as they are, paths made absolute
    against the config file's folder."""
    jars = _text_list(value, name, '["/usr/share/java/postgresql.jar"]')
    return tuple(
        jar if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", jar) else str(path_value(jar, name, base))
        for jar in jars
    )


def globs_value(value: object, name: str, _base: Path) -> tuple[TableGlob, ...]:
    globs = _text_list(value, name, '["shop.*", "crm.customer"]')
    out = []
    for glob in globs:
        if "." not in glob:
            raise ConfigError(
                f"{where(name)}: {glob!r} does not match db.table names",
                field=name,
                hint=f"patterns match `database.table`: write {glob + '.*'!r} for a whole database",
            )
        try:
            out.append(TableGlob.parse(glob))
        except ValueError as error:
            raise ConfigError(
                f"{where(name)}: {error}",
                field=name,
                hint="a glob is database.table; a part holding a dot or a space goes in "
                'backticks: "`we.ird db`.*"',
            ) from None
    return tuple(out)


def _table(value: object, name: str, example: str) -> dict[str, object]:
    value = _toml_text(value)
    if not isinstance(value, dict):
        raise ConfigError(f"{where(name)} must be a TOML table", field=name, hint=f"e.g. {example}")
    return value


_NAMESPACE = re.compile(r"^[^.\s`/]+$")


def namespace_map_value(value: object, name: str, _base: Path) -> dict[str, str]:
    out = {}
    for database, namespace in _table(value, name, '{ shop = "lake_shop" }').items():
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise ConfigError(
                f"{where(name)}: the namespace for {database!r} must be a name "
                "(one level: no dots, slashes, spaces or backticks)",
                field=name,
            )
        out[database] = namespace
    return out


def key_columns_value(value: object, name: str, _base: Path) -> dict[TableName, tuple[str, ...]]:
    example = '{ "shop.audit" = ["id", "at"] }'
    out = {}
    for table, columns in _table(value, name, example).items():
        try:
            parsed = TableName.parse(table)
        except ValueError:
            raise ConfigError(
                f"{where(name)}: {table!r} is not a db.table name",
                field=name,
                hint=f"e.g. {example}; a part holding a dot goes in backticks: "
                '"`we.ird db`.t" = ["id"]',
            ) from None
        out[parsed] = _text_list(columns, name, example, allow_empty=False)
    return out


def spark_conf_value(value: object, name: str, _base: Path) -> dict[str, str]:
    out = {}
    for key, item in _table(value, name, '{ "spark.driver.memory" = "4g" }').items():
        if not key.startswith("spark."):
            raise ConfigError(
                f"{where(name)}: {key!r} is not a Spark setting (they start with spark.)",
                field=name,
                hint='quote dotted keys: "spark.sql.catalog.lake.type" = "rest"',
            )
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            out[key] = str(item)
        else:
            raise ConfigError(f"{where(name)}: {key} must be text or a number", field=name)
    return out
