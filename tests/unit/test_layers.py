"""The floor plan of src/binlake (docs/architecture.md, "Layers"), read from the import graph.

Every top-level package or module of binlake has a layer below; a module may import from its own
layer or a lower one, never from a higher one, and no chain of imports comes back to where it
started. Every import counts, wherever it is written (inside a function, under TYPE_CHECKING).
Only ``binlake.lake`` imports pyspark or py4j, and ``binlake.binlog`` nothing else of ours.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import binlake

PACKAGE = Path(binlake.__file__).parent
#: The layers, lowest first; each names top-level packages and modules of binlake ("binlake"
#: is the package's own ``__init__``, which holds only the version).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("binlake", "binlog"),
    ("errors", "crashpoints", "position", "gtid"),
    ("config", "storage", "metrics", "typemap", "cuts"),
    ("ddl", "relay"),
    ("source",),
    ("lake",),
    ("console", "verify", "retry"),
    ("snapshot", "maintain"),
    ("apply",),
    ("cli",),
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
SPARK_PACKAGES = ("pyspark", "py4j")


def module_files() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["binlake", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = module_files()


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every module name ``module`` imports (absolute, ours and others')."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield base
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    yield f"{base}.{alias.name}"


def graph() -> dict[str, set[str]]:
    return {
        module: {name for name in imported_names(module, path) if name in MODULES}
        for module, path in MODULES.items()
    }


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "binlake"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node, or a node importing itself
    (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_package_and_top_level_module_has_a_layer() -> None:
    units = {unit(module) for module in MODULES}
    assert units - set(RANK) == set(), "place the new package or module in LAYERS"
    assert set(RANK) - units == set(), "LAYERS names a package that no longer exists"


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = [
        f"{module} ({unit(module)}, layer {RANK[unit(module)]}) imports {target} "
        f"({unit(target)}, layer {RANK[unit(target)]})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if RANK[unit(target)] > RANK[unit(module)]
    ]
    assert upward == []


def test_no_import_circle_between_modules() -> None:
    assert cycles(graph()) == []


def test_no_import_circle_between_packages_of_one_layer() -> None:
    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        edges.setdefault(unit(module), set()).update(
            unit(t) for t in targets if unit(t) != unit(module)
        )
    assert cycles(edges) == []


def test_only_the_lake_imports_pyspark_or_py4j() -> None:
    outside = [
        f"{module} imports {name}"
        for module, path in MODULES.items()
        if unit(module) != "lake"
        for name in imported_names(module, path)
        if name.split(".")[0] in SPARK_PACKAGES
    ]
    assert outside == []


def test_binlog_imports_nothing_else_of_ours() -> None:
    outside = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        if unit(module) == "binlog"
        for target in sorted(targets)
        if unit(target) != "binlog"
    ]
    assert outside == []


def test_the_checks_see_an_upward_import_and_a_circle() -> None:
    """The graph reader resolves relative and function-level imports, and ``cycles`` finds a
    circle: the tests above cannot pass by reading nothing."""
    edges = graph()
    assert "binlake.lake.session" in edges["binlake.apply.replicate"]
    assert "binlake.position" in edges["binlake.relay.handoff"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]


NO_SPARK = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class NoSpark:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pyspark", "py4j"):
                raise ImportError(f"{name} is not importable here")
            return None

    sys.meta_path.insert(0, NoSpark())
    for package in sys.argv[1:]:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            importlib.import_module(info.name)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("ok")
    """
)


@pytest.mark.parametrize("package", ["binlake.ddl", "binlake.binlog"])
def test_package_imports_where_pyspark_is_not_importable(package: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", NO_SPARK, package],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"  # the finder did keep pyspark out
