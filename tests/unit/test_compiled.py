"""The compiled hot path's choice (binlake.compiled): compiled modules run only when current, a
stale or partial build falls back to pure Python for all of them, ``BINLAKE_PURE_PYTHON=1``
forces the sources, and the compiled and pure decoders agree on every byte fixture."""

from __future__ import annotations

import ast
import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import binlake
from binlake import compiled
from binlake.compiled import (
    BUILD_RECORD,
    BUILT_MODULES,
    COMPILED_MODULES,
    NATIVE_MODULES,
    PURE_ENV,
    pure_reason,
    source_path,
    source_paths,
)

PACKAGE = Path(binlake.__file__).parent
TESTS = Path(__file__).parents[1]
STALE = "stale build: `pip install -e .`"
IMPORT_ALL = "import importlib; " + "; ".join(
    f"print(importlib.import_module({m!r}).__file__)" for m in COMPILED_MODULES
)


def run_python(
    code: str, path: Path | str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    environ.update(PYTHONPATH=str(path), **env)
    command = [sys.executable, "-c", code, *args]
    return subprocess.run(command, env=environ, capture_output=True, text=True)


@pytest.fixture(autouse=True)
def no_pure_python_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests ask for pure Python themselves, also when the suite runs pure."""
    monkeypatch.delenv(PURE_ENV, raising=False)


@pytest.fixture
def fake_build(tmp_path: Path) -> Path:
    """A copy of binlake's sources with a garbage "extension" beside each compiled module's
    source and each native module's C source (importing one fails) and the record of a build
    of these sources."""
    package = tmp_path / "binlake"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (package / BUILD_RECORD).unlink(missing_ok=True)
    for module in BUILT_MODULES:
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        source_path(module, package).with_suffix(suffix).write_bytes(b"not an extension")
    (package / BUILD_RECORD).write_text(compiled.source_record(package))
    return package


def test_a_build_whose_record_matches_every_source_is_imported(fake_build: Path) -> None:
    assert pure_reason(fake_build) is None
    run = run_python(IMPORT_ALL, fake_build.parent)
    assert run.returncode != 0 and "ImportError" in run.stderr  # the garbage extension was taken


def test_a_source_edited_after_the_build_makes_every_compiled_module_load_from_source(
    fake_build: Path,
) -> None:
    header = source_path("binlake.binlog.header", fake_build)
    header.write_text(header.read_text() + "\n# edited\n")
    assert pure_reason(fake_build) == STALE
    run = run_python(IMPORT_ALL, fake_build.parent)
    assert run.returncode == 0, run.stderr
    files = run.stdout.split()
    assert files == [str(source_path(m, fake_build)) for m in COMPILED_MODULES]


NATIVE_LOADED = (
    "from binlake.binlog import rowplan; from binlake.cli import render; "
    "from binlake.snapshot import result_set; "
    "print(rowplan.NATIVE is not None, render.NATIVE is not None, result_set.NATIVE is not None)"
)
NATIVE_SOURCES = [
    (module, part)
    for module in NATIVE_MODULES
    for part in range(len(source_paths(module, PACKAGE)))
]


def test_the_record_names_every_native_modules_c_source_and_its_headers(fake_build: Path) -> None:
    recorded = (fake_build / BUILD_RECORD).read_text().splitlines()
    for module in NATIVE_MODULES:
        sources = source_paths(module, fake_build)
        assert [path.suffix for path in sources] == [".c"] + [".h"] * (len(sources) - 1)
        for source in sources:
            assert any(line.endswith(f"  {source.relative_to(fake_build)}") for line in recorded)
    assert len(source_paths("binlake.binlog._rowimage", fake_build)) == 2  # its values header


@pytest.mark.parametrize(("module", "part"), NATIVE_SOURCES)
def test_a_c_source_or_header_edited_after_the_build_loads_no_extension(
    fake_build: Path, module: str, part: int
) -> None:
    source = source_paths(module, fake_build)[part]
    source.write_text(source.read_text() + "\n/* edited */\n")
    assert pure_reason(fake_build) == STALE
    run = run_python(NATIVE_LOADED, fake_build.parent)
    assert run.returncode == 0, run.stderr  # no garbage extension was imported
    assert run.stdout.split() == ["False"] * 3


@pytest.mark.parametrize("module", NATIVE_MODULES)
def test_a_build_missing_a_native_extension_is_refused(fake_build: Path, module: str) -> None:
    stem = source_path(module, fake_build).with_suffix("")
    for extension in stem.parent.glob(f"{stem.name}.*.so"):
        extension.unlink()
    assert pure_reason(fake_build) == "incomplete build: `pip install -e .`"
    run = run_python(NATIVE_LOADED, fake_build.parent)
    assert run.returncode == 0 and run.stdout.split() == ["False"] * 3, run.stderr


def test_pure_python_on_demand_loads_no_native_extension() -> None:
    forced = run_python(NATIVE_LOADED, PACKAGE.parent, **{PURE_ENV: "1"})
    assert forced.stdout.split() == ["False"] * 3, forced.stderr
    default = run_python(NATIVE_LOADED, PACKAGE.parent)
    assert default.stdout.split() == [str(pure_reason() is None)] * 3, default.stderr


def test_a_build_without_its_record_is_refused(fake_build: Path) -> None:
    (fake_build / BUILD_RECORD).unlink()
    assert pure_reason(fake_build) == STALE
    assert run_python(IMPORT_ALL, fake_build.parent).returncode == 0


def test_a_build_missing_one_extension_is_refused_for_all_modules(fake_build: Path) -> None:
    stem = source_path(COMPILED_MODULES[-1], fake_build).with_suffix("")
    for extension in stem.parent.glob(f"{stem.name}.*.so"):
        extension.unlink()
    assert pure_reason(fake_build) == "incomplete build: `pip install -e .`"
    assert run_python(IMPORT_ALL, fake_build.parent).returncode == 0


def test_pure_python_on_demand_loads_sources_beside_current_extensions(fake_build: Path) -> None:
    run = run_python(IMPORT_ALL, fake_build.parent, **{PURE_ENV: "1"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(source_path(m, fake_build)) for m in COMPILED_MODULES]


def test_no_extensions_is_pure_python_not_built(tmp_path: Path) -> None:
    package = tmp_path / "binlake"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    assert pure_reason(package) == "not built: `pip install -e .` with a C compiler"


def test_version_says_compiled_or_pure_python() -> None:
    code = "from binlake.cli.main import run; run(['--version'])"
    forced = run_python(code, PACKAGE.parent, **{PURE_ENV: "1"})
    assert forced.stdout.strip() == f"binlake {binlake.__version__}, pure Python ({PURE_ENV}=1)"
    default = run_python(code, PACKAGE.parent).stdout.strip()
    reason = pure_reason()
    mode = f"compiled ({len(COMPILED_MODULES)} modules)" if reason is None else "pure Python"
    assert default.startswith(f"binlake {binlake.__version__}, {mode}")


def test_pure_python_is_said_once_per_process_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(PURE_ENV, raising=False)
    monkeypatch.setattr(
        compiled._Choice, "reason", "not built: `pip install -e .` with a C compiler"
    )
    monkeypatch.setattr(compiled._Choice, "said", False)
    for _ in range(3):
        compiled.say_once_if_pure(sys.stderr)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "binlake: running pure Python (not built: `pip install -e .` with a C compiler)"
    ]


def test_a_stale_build_is_said_once_after_a_dump_and_not_before_an_error(
    fake_build: Path, tmp_path: Path
) -> None:
    header = source_path("binlake.binlog.header", fake_build)
    header.write_text(header.read_text() + "\n# edited\n")
    code = "import sys; from binlake.cli.main import run; sys.exit(run(sys.argv[1:]))"
    fixture = TESTS / "fixtures" / "binlog" / "types.binlog"
    dump = run_python(code, fake_build.parent, "binlog", "dump", str(fixture))
    assert dump.returncode == 0 and "Format_desc" in dump.stdout
    assert dump.stderr.splitlines() == [f"binlake: running pure Python ({STALE})"]
    missing = run_python(
        code, fake_build.parent, "binlog", "dump", str(tmp_path / "nowhere.000001")
    )
    lines = missing.stderr.splitlines()
    assert missing.returncode != 0 and len(lines) == 2
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ")


def test_pure_python_asked_for_is_not_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PURE_ENV, "1")
    monkeypatch.setattr(compiled._Choice, "reason", f"{PURE_ENV}=1")
    monkeypatch.setattr(compiled._Choice, "said", False)
    compiled.say_once_if_pure(sys.stderr)
    assert capsys.readouterr().err == ""


def test_compiled_and_pure_decoders_give_identical_events_groups_and_rows() -> None:
    path = os.pathsep.join([str(PACKAGE.parent), str(TESTS), str(TESTS.parent / "dev")])
    code = f"import runpy; runpy.run_path({str(TESTS / 'decode_dump.py')!r}, run_name='__main__')"
    built = run_python(code, path)
    pure = run_python(code, path, **{PURE_ENV: "1"})
    assert built.returncode == 0 and pure.returncode == 0, built.stderr + pure.stderr
    if not built.stderr.startswith("compiled"):
        pytest.skip(f"no current compiled build to compare: {built.stderr.strip()}")
    assert pure.stderr.startswith("pure Python")
    assert len(built.stdout.splitlines()) > 200
    assert built.stdout == pure.stdout


def calls_in_slice_bounds(source: str) -> list[str]:
    """The slices of ``source`` whose bounds call anything but ``len``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)):
            continue
        bounds = (node.slice.lower, node.slice.upper, node.slice.step)
        calls = [c for b in bounds if b is not None for c in ast.walk(b) if isinstance(c, ast.Call)]
        if any(not (isinstance(c.func, ast.Name) and c.func.id == "len") for c in calls):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_calls_in_slice_bounds_are_found() -> None:
    source = "view = view[os.write(fd, view):]\nhead = data[: len(data) // 2]\n"
    assert calls_in_slice_bounds(source) == ["line 1: view[os.write(fd, view):]"]


@pytest.mark.parametrize("module", COMPILED_MODULES)
def test_no_compiled_module_calls_in_a_slice_bound(module: str) -> None:
    """mypyc 2.4.1 evaluates the bounds of a slice of anything but a list, tuple, str or bytes
    twice: ``view[os.write(fd, view):]`` on a memoryview wrote each relay file's header twice."""
    assert calls_in_slice_bounds(source_path(module).read_text()) == []
