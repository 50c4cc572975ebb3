"""The compiled hot path (issue #37): the modules mypyc builds, and whether this process runs them.

setup.py compiles the modules of ``COMPILED_MODULES`` with mypyc when a C compiler, Python's
headers and mypy are at hand, and the C extensions of ``NATIVE_MODULES`` with them (``pip
install -e .`` puts the extensions beside their sources), and records the SHA-256 of every
source it compiled in ``BUILD_RECORD`` (``sha256sum``'s format), written after a build that
succeeded and removed before each build.

At the import of binlake, ``choose()`` decides once for the whole process, compiled or pure, and
for all of these modules together: mypyc's modules call each other in C, so a pure module among
compiled ones would still run its callers' compiled code. The compiled modules run only when
each has its extension and the record names the SHA-256 of its source as it is now. Otherwise (no
extensions, a source edited or checked out since the build, no record, ``BINLAKE_PURE_PYTHON=1``)
a meta-path finder loads each of them from its ``.py``, and the users of a native extension run
its pure-Python twin (they see ``binlog.values`` loaded from source): a stale extension is
never imported.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Final, TextIO

#: The hot path: the binlog decoders and their value codecs, the relay log's writer, reader and
#: scan, the receiver, its framing and event checks; `binlake binlog dump`'s rendering. mypyc
#: 2.4.1's pitfalls these sources avoid (docs/architecture.md, "Compiled modules"): a call in a
#: slice's bounds is made twice when the sliced object is not a list, tuple, str or bytes; a
#: generator over a ``bytearray`` is an internal error.
COMPILED_MODULES: Final = (
    "binlake.binlog.header",
    "binlake.binlog.format",
    "binlake.binlog.codec",
    "binlake.binlog.values",
    "binlake.binlog.rows",
    "binlake.binlog.rowcodec",
    "binlake.binlog.events",
    "binlake.binlog.tablemap",
    "binlake.binlog.stream",
    "binlake.binlog.transactions",
    "binlake.binlog.encodings.charsets",
    "binlake.binlog.encodings.decimals",
    "binlake.binlog.encodings.mysql_json",
    "binlake.binlog.encodings.mariadb_types",
    "binlake.binlog.encodings.temporal",
    "binlake.relay.reader",
    "binlake.relay.scan",
    "binlake.relay.writer",
    "binlake.relay.runs",
    "binlake.source.receiver",
    "binlake.source.event_check",
    "binlake.source.wire",
    "binlake.source.packets",
    "binlake.cli.render",
    "binlake.keyindex.encode",
    "binlake.keyindex.store",
    "binlake.lake.write.changes",
)
#: Extensions written in C (issue #37: where mypyc cannot reach), each built from the ``.c`` beside
#: its Python twin: row images decoded from a plan (``binlog/rowplan.py``), events framed
#: (``binlog/stream.py``), a row's JSON text for `binlake binlog dump --rows` (``cli/render.py``),
#: a snapshot chunk's packet framing, Arrow binary views and date-time text
#: (``snapshot/result_set.py``, ``cells.py``, ``decode.py``).
#: Recorded and refused when stale like the mypyc modules: their users import them only when the
#: compiled modules run.
NATIVE_MODULES: Final = (
    "binlake.binlog._rowimage",
    "binlake.binlog._frame",
    "binlake.cli._rowtext",
    "binlake.snapshot._textcells",
)
#: Every extension a build makes: the compiled modules' and the native ones.
BUILT_MODULES: Final = COMPILED_MODULES + NATIVE_MODULES
BUILD_RECORD: Final = "compiled.sha256"
PURE_ENV: Final = "BINLAKE_PURE_PYTHON"
PACKAGE: Final = Path(__file__).parent


def source_path(module: str, package: Path = PACKAGE) -> Path:
    """The source of a module of ``BUILT_MODULES`` under ``package`` (binlake's folder): the
    ``.py`` of a compiled module, the ``.c`` of a native one."""
    suffix = ".c" if module in NATIVE_MODULES else ".py"
    return package.joinpath(*module.split(".")[1:]).with_suffix(suffix)


def source_paths(module: str, package: Path = PACKAGE) -> tuple[Path, ...]:
    """Every source a module of ``BUILT_MODULES`` is built from: its ``source_path``, and for a
    native one the headers beside it that share its name (``_rowimage_values.h``)."""
    source = source_path(module, package)
    if module not in NATIVE_MODULES:
        return (source,)
    return (source, *sorted(source.parent.glob(f"{source.stem}_*.h")))


def source_record(package: Path = PACKAGE) -> str:
    """The build record of the sources as they are now: one ``<sha256>  <path>`` line a source."""
    lines = []
    for module in BUILT_MODULES:
        for path in source_paths(module, package):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            lines.append(f"{digest}  {path.relative_to(package)}")
    return "\n".join(lines) + "\n"


def _has_extension(module: str, package: Path) -> bool:
    source = source_path(module, package)
    stem = source.with_suffix("")
    return any(
        Path(f"{stem}{suffix}").exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def pure_reason(package: Path = PACKAGE) -> str | None:
    """Why this process runs pure Python (``None``: the compiled modules are current)."""
    if os.environ.get(PURE_ENV) == "1":
        return f"{PURE_ENV}=1"
    built = [m for m in BUILT_MODULES if _has_extension(m, package)]
    if not built:
        return "not built: `pip install -e .` with a C compiler"
    if len(built) < len(BUILT_MODULES):
        return "incomplete build: `pip install -e .`"
    try:
        recorded = (package / BUILD_RECORD).read_text()
    except OSError:
        recorded = ""
    if recorded != source_record(package):
        return "stale build: `pip install -e .`"
    return None


class SourceFirst:
    """A meta-path finder (no base class: importlib.abc costs 20 ms to import) that loads the
    modules of ``COMPILED_MODULES`` from their ``.py``, beside any extension."""

    def __init__(self, package: Path = PACKAGE) -> None:
        self.package = package

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname, self.package))


class _Choice:
    reason: str | None = None
    said = False


def choose() -> None:
    """Compiled or pure for this process; called once, by binlake's ``__init__``."""
    _Choice.reason = pure_reason()
    if _Choice.reason is not None and not any(isinstance(f, SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceFirst())


def describe() -> str:
    """``compiled (27 modules)`` or ``pure Python (why)``, as ``binlake --version`` says it."""
    if _Choice.reason is None:
        return f"compiled ({len(COMPILED_MODULES)} modules)"
    return f"pure Python ({_Choice.reason})"


def say_once_if_pure(stream: TextIO) -> None:
    """One line on ``stream``, once a process, when pure Python runs though not asked for."""
    if _Choice.said or _Choice.reason is None or os.environ.get(PURE_ENV) == "1":
        return
    _Choice.said = True
    print(f"binlake: running {describe()}", file=stream)
