"""The error tree: one root, names ending in Error, a hint on every class, structured fields."""

from __future__ import annotations

import importlib
import pkgutil

import binlake
from binlake.errors import (
    BinlakeError,
    SourceConfigError,
    SourcePositionLostError,
    exit_code_for,
)


def all_error_classes() -> list[type[BinlakeError]]:
    for module in pkgutil.walk_packages(binlake.__path__, "binlake."):
        if module.name.endswith("__main__"):
            continue
        importlib.import_module(module.name)
    found: list[type[BinlakeError]] = []
    stack: list[type[BinlakeError]] = [BinlakeError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_every_error_class_is_named_error_and_has_a_hint_of_its_own_branch() -> None:
    classes = all_error_classes()
    assert len(classes) > 30
    for cls in classes:
        assert cls.__name__.endswith("Error"), cls
        assert cls.default_hint, cls
        assert "\n" not in cls.default_hint, f"{cls.__name__}: the hint must be one line"


def test_every_error_maps_to_a_non_zero_exit_code() -> None:
    for cls in all_error_classes():
        error = cls.__new__(cls)
        assert exit_code_for(error) > 1, cls


def test_fields_report_the_structured_fields_of_every_level() -> None:
    error = SourceConfigError("binlog is off", host="db1", port=3306, setting="log_bin")
    fields = error.fields()
    assert fields["error"] == "SourceConfigError"
    assert (fields["host"], fields["port"], fields["setting"]) == ("db1", 3306, "log_bin")
    assert "code" not in fields  # fields left unset are not reported
    assert list(fields)[-1] == "hint"


def test_position_lost_names_the_remedy_and_the_requested_position() -> None:
    error = SourcePositionLostError("purged", requested="mariadb-bin.000001:4")
    assert error.fields()["requested"] == "mariadb-bin.000001:4"
    assert "binlake snapshot" in error.hint
    assert exit_code_for(error) == 66
