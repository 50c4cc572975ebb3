"""binlake's build: pure Python, plus the hot path compiled by mypyc where it can be built.

The modules of ``binlake.compiled.COMPILED_MODULES`` are compiled, and the C extensions of
``NATIVE_MODULES`` built with them, when mypy (mypyc), a C compiler and Python's headers are at
hand and ``BINLAKE_PURE_PYTHON`` is not ``1``; otherwise, or when the compilation fails, the
package is built and installed as pure Python. A build that succeeds writes the record of the
sources it compiled (``binlake/compiled.sha256``), by which binlake refuses stale extensions
(docs/architecture.md, "Compiled modules").
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
PACKAGE = ROOT / "src" / "binlake"
PLAN = runpy.run_path(str(PACKAGE / "compiled.py"))


def why_not_compiled() -> str | None:
    if os.environ.get(PLAN["PURE_ENV"]) == "1":
        return f"{PLAN['PURE_ENV']}=1"
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers (Python.h)"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "no mypyc (mypy)"
    return None


class BuildRecorded(build_ext):
    """build_ext that writes the record of the compiled sources after a build that succeeded,
    and falls back to pure Python (no record, so no extension is ever imported) when it fails."""

    def run(self) -> None:
        record = self._record_path()
        record.unlink(missing_ok=True)
        if not self.extensions:
            return
        try:
            super().run()
        except Exception as error:  # a compiler error: the pure package still installs
            print(f"binlake: compiling failed, pure Python: {error}", file=sys.stderr)
            return
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(RECORD)

    def _record_path(self) -> Path:
        # pip install -e . sets editable_mode (setuptools copies the extensions to src/ then),
        # setup.py build_ext --inplace sets inplace; a wheel's record goes with its extensions
        in_source = self.inplace or getattr(self, "editable_mode", False)
        base = PACKAGE if in_source else Path(self.build_lib) / "binlake"
        return base / PLAN["BUILD_RECORD"]


def extensions() -> list[Any]:
    reason = why_not_compiled()
    if reason is not None:
        print(f"binlake: building pure Python: {reason}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    paths = [
        str(PLAN["source_path"](m, PACKAGE).relative_to(ROOT)) for m in PLAN["COMPILED_MODULES"]
    ]
    try:
        compiled = list(mypycify(paths, opt_level="3"))
    except (Exception, SystemExit) as error:  # mypyc refused a module: build pure, say why
        print(f"binlake: building pure Python: mypyc failed ({error})", file=sys.stderr)
        return []
    return compiled + native_extensions()


def native_extensions() -> list[Any]:
    """The C extensions of ``NATIVE_MODULES``, each from the ``.c`` beside its Python twin."""
    return [
        Extension(
            module,
            [str(PLAN["source_path"](module, PACKAGE).relative_to(ROOT))],
            depends=[
                str(path.relative_to(ROOT)) for path in PLAN["source_paths"](module, PACKAGE)[1:]
            ],
            extra_compile_args=["-O2", "-Wall"],
        )
        for module in PLAN["NATIVE_MODULES"]
    ]


RECORD = PLAN["source_record"](PACKAGE)  # the sources as mypyc reads them below
setup(ext_modules=extensions(), cmdclass={"build_ext": BuildRecorded})
