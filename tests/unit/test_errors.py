"""The error tree: one root, names ending in Error, a hint on every class, structured fields."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import binlake
import binlake.errors
from binlake.errors import (
    BinlakeError,
    RowImageError,
    SourceAuthError,
    SourceConfigError,
    SourceConnectionLostError,
    SourcePositionLostError,
    StatementFormatError,
    UnsupportedDefaultError,
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


#: The exit code of every error class as the first-match table ``errors.EXIT_CODES`` gave it
#: before the codes became class attributes (computed once from that table, then removed).
EXIT_CODES_BEFORE_ISSUE_34: dict[int, tuple[str, ...]] = {
    64: ("UsageError",),
    65: (
        "BinlogFormatError", "ChecksumMismatchError", "DuplicateTransactionError",
        "InvalidEventError", "LogCorruptionError", "NotABinlogError", "OrphanEventError",
        "SourceIdentityChangedError", "TruncatedEventError", "UnsupportedTypeError",
        "ValueDecodeError",
    ),
    66: ("CutError", "CutNotFoundError", "CutTableError", "SourcePositionLostError",),
    69: (
        "CatalogUnreachableError", "SnapshotUnsupportedError", "SourceConnectionLostError",
        "SourceError", "SourceUnreachableError", "SparkMasterUnreachableError",
        "SparkNoExecutorsError", "SparkSetupError",
    ),
    70: (
        "ApplyError", "BinlakeError", "CatalogError", "CatchUpTimeoutError",
        "CommitConflictError", "IncompatibleSchemaChangeError", "SchemaEvolutionError",
        "SnapshotError", "SnapshotShapeChangedError", "SparkError", "SparkStatementError",
        "TableMissingInLakeError", "TableNotInSourceError", "UnsupportedDdlError",
        "UnsupportedDefaultError", "VerifyError", "VerifyRetriesExhaustedError",
    ),
    73: ("DeletionVectorError", "TargetError"),
    74: (
        "CheckpointError", "CheckpointRecordError", "DiskFullError", "FileAccessError",
        "IndexFileError", "KeyIndexDuplicateKeyError", "KeyIndexError", "KeyIndexUntrustedError",
        "KeyIndexVersionError", "NoIndexError", "NotAStateFileError", "RelayLogStateError",
        "SnapshotPlanError", "StateFileCorruptError", "StateFileError",
        "StatePayloadTooLargeError", "StorageError", "XidMismatchError",
    ),
    75: ("CatalogCommitUnknownError", "StateLockedError",),
    76: ("SourceProtocolError",),
    77: ("CatalogAuthError", "SourceAuthError",),
    78: (
        "CatalogConfigError", "ConfigError", "RowImageError", "SourceConfigError",
        "SparkMasterError", "StatementFormatError",
    ),
}  # fmt: skip


def test_every_error_exits_with_the_code_the_old_first_match_table_gave_it() -> None:
    """No behaviour change: a new class must be added here, with the code its branch gives."""
    expected = {name: code for code, names in EXIT_CODES_BEFORE_ISSUE_34.items() for name in names}
    found = {cls.__name__: cls.exit_code for cls in all_error_classes()}
    assert found == expected


def test_exit_code_and_retryable_are_class_attributes_never_fields() -> None:
    assert (BinlakeError.exit_code, BinlakeError.retryable) == (70, False)
    for cls in all_error_classes():
        assert not {"exit_code", "retryable"} & set(cls.declared_fields()), cls
        assert isinstance(cls.exit_code, int) and cls.exit_code > 1, cls
        assert isinstance(cls.retryable, bool), cls


def test_only_outages_and_lost_races_are_retryable() -> None:
    retryable = {cls.__name__ for cls in all_error_classes() if cls.retryable}
    assert retryable == {
        "SourceUnreachableError", "SourceConnectionLostError", "SourceProtocolError",
        "SparkMasterUnreachableError", "CatalogUnreachableError", "CatalogCommitUnknownError",
        "CommitConflictError",
    }  # fmt: skip


def test_every_error_of_the_two_tree_modules_is_importable_from_binlake_errors() -> None:
    for cls in all_error_classes():
        if cls.__module__ in ("binlake.errors", "binlake.binlog.errors"):
            assert getattr(binlake.errors, cls.__name__) is cls


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
    assert error.exit_code == 66


BASE_KEYWORDS = frozenset({"hint", "file", "offset", "event_type", "table"})


def test_every_error_raised_in_the_package_passes_only_fields_its_class_declares() -> None:
    """Fields are declared once per class (annotations) and taken as keyword arguments; a
    keyword no class above declares would be a TypeError where the error is raised."""
    classes = {cls.__name__: cls for cls in all_error_classes()}
    package = Path(binlake.__file__).parent
    calls = 0
    wrong = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            cls = classes.get(name or "")
            if cls is None:
                continue
            calls += 1
            accepted = BASE_KEYWORDS | set(cls.declared_fields())
            for keyword in node.keywords:
                if keyword.arg is not None and keyword.arg not in accepted:
                    wrong.append(f"{path.name}:{node.lineno} {name}({keyword.arg}=...)")
    assert calls > 100
    assert wrong == []


def test_an_undeclared_field_is_refused() -> None:
    with pytest.raises(TypeError, match="has no field 'setting'"):
        SourcePositionLostError("purged", setting="log_bin")


def test_fields_keep_their_declared_defaults_and_fixed_values() -> None:
    lost = SourceConnectionLostError("eof", host="db1")
    assert (lost.timed_out, lost.code, lost.host) == (False, None, "db1")
    statement = StatementFormatError("DML in a QUERY", table="shop.t", file="relay-bin.000001")
    assert statement.fields()["setting"] == "binlog_format"
    assert (statement.table, statement.file) == ("shop.t", "relay-bin.000001")
    assert RowImageError("no column", table="shop.t").setting == "binlog_row_image"
    assert "shop.t" in UnsupportedDefaultError("expr", table="shop.t").hint
    assert UnsupportedDefaultError("expr").hint == UnsupportedDefaultError.default_hint
    assert set(SourceAuthError.declared_fields()) == {"code", "host", "port", "user"}
