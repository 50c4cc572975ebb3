"""The floor plan of src/binlake (docs/architecture.md, "Layers"), read from the import graph.

Every top-level package or module of binlake has a layer below; a module may import from its own
layer or a lower one, never from a higher one, and no chain of imports comes back to where it
started. A package split into rooms (``ROOMS``: ``binlake.lake`` and ``binlake.binlog``) ranks
its rooms the same way inside its layer: a room imports from itself or a lower room, never a
higher one. Every import counts, wherever it is written (inside a function, under
TYPE_CHECKING). Only ``binlake.lake`` imports pyspark or py4j (and not its Spark-free rooms,
``lake.schema`` and ``lake.catalog``, which ``status`` and ``verify`` use without Spark),
``binlake.binlog`` nothing else of ours, and nothing imports ``binlake_dev`` (test support).

The house's size rules hold here too: no module over ``MAX_MODULE_LINES`` lines, no folder
holding more than ``MAX_FLAT_SHARE`` of the package's lines in its own files (sub-packages count
separately), and no class name defined twice in the package (one name, one meaning).
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
#: is the package's own ``__init__``, which holds the version and chooses, through ``compiled``,
#: the compiled hot path or pure Python).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("binlake", "binlog", "compiled"),
    ("errors", "crashpoints", "position", "gtid"),
    ("config", "storage", "metrics", "typemap", "cuts"),
    ("ddl", "relay", "keyindex"),
    ("source",),
    ("lake",),
    ("console", "verify", "retry"),
    ("snapshot", "maintain"),
    ("apply",),
    ("cli",),
)
#: The rooms of a package, lowest first: its sub-packages, or a module of its own named as a
#: room; its other modules (``""``) rank where the empty name stands. A room imports from its
#: own rank or a lower one.
ROOMS: dict[str, tuple[tuple[str, ...], ...]] = {
    # the error tree's root (pure code raises it); pure codecs of one value type each; the
    # event and row decoders that use them
    "binlog": (("errors",), ("encodings",), ("",)),
    # Spark-free first: SQL text and schema plans; where tables live and what their metadata
    # says; then the Spark process and catalog lookups; the commit primitives on top of it; and
    # what uses them: consistent cuts, and the applier's tables (create, alter, act, maintain).
    "lake": (("",), ("schema",), ("catalog",), ("spark",), ("write",), ("cuts", "tables")),
}
RANK: dict[str, tuple[int, int]] = {
    unit: (rank, 0) for rank, units in enumerate(LAYERS) for unit in units
}
for _package, _rooms in ROOMS.items():
    for _sub, _names in enumerate(_rooms):
        for _name in _names:
            RANK[f"{_package}.{_name}" if _name else _package] = (RANK[_package][0], _sub)
SPARK_PACKAGES = ("pyspark", "py4j")
SPARK_FREE_ROOMS = ("binlake.lake.schema", "binlake.lake.catalog")
MAX_MODULE_LINES = 600
MAX_FLAT_SHARE = 0.15


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
    """The top-level package or module ``module`` belongs to, or its room (``lake.write``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "binlake"
    if parts[1] in ROOMS and len(parts) > 2 and parts[2] in _room_names(parts[1]):
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def _room_names(package: str) -> set[str]:
    return {name for names in ROOMS[package] for name in names if name}


def layer_unit(module: str) -> str:
    """The top-level unit of ``module``, rooms folded into their package."""
    return unit(module).split(".")[0]


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
    units = {layer_unit(module) for module in MODULES}
    layered = {name for names in LAYERS for name in names}
    assert units - layered == set(), "place the new package or module in LAYERS"
    assert layered - units == set(), "LAYERS names a package that no longer exists"


def test_every_sub_package_of_a_package_with_rooms_is_a_room() -> None:
    """A new sub-package of ``lake`` or ``binlog`` must be given its rank in ``ROOMS``."""
    for package in ROOMS:
        folders = {p.name for p in (PACKAGE / package).iterdir() if (p / "__init__.py").is_file()}
        assert folders <= _room_names(package), f"rank {package}'s sub-packages in ROOMS"


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = [
        f"{module} ({unit(module)}, layer {RANK[unit(module)]}) imports {target} "
        f"({unit(target)}, layer {RANK[unit(target)]})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if RANK[unit(target)][0] > RANK[unit(module)][0]
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


def test_no_room_imports_from_a_higher_room() -> None:
    upward = [
        f"{module} ({unit(module)}) imports {target} ({unit(target)})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if layer_unit(module) == layer_unit(target) and RANK[unit(target)] > RANK[unit(module)]
    ]
    assert upward == []


def test_only_the_lake_imports_pyspark_or_py4j() -> None:
    outside = [
        f"{module} imports {name}"
        for module, path in MODULES.items()
        if layer_unit(module) != "lake" or module.startswith(SPARK_FREE_ROOMS)
        for name in imported_names(module, path)
        if name.split(".")[0] in SPARK_PACKAGES
    ]
    assert outside == []


def test_binlog_imports_nothing_else_of_ours() -> None:
    outside = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        if layer_unit(module) == "binlog"
        for target in sorted(targets)
        if layer_unit(target) != "binlog"
    ]
    assert outside == []


def test_nothing_imports_the_test_support() -> None:
    """``binlake_dev`` (the tests' servers, the power-cut file system) is not part of binlake."""
    inside = [
        f"{module} imports {name}"
        for module, path in MODULES.items()
        for name in imported_names(module, path)
        if name.split(".")[0] == "binlake_dev"
    ]
    assert inside == []


def test_the_checks_see_an_upward_import_and_a_circle() -> None:
    """The graph reader resolves relative and function-level imports, and ``cycles`` finds a
    circle: the tests above cannot pass by reading nothing."""
    edges = graph()
    assert "binlake.lake.spark.session" in edges["binlake.apply.replicate"]
    assert unit("binlake.lake.write.commit") == "lake.write"
    assert unit("binlake.lake") == "lake"
    assert RANK["lake.tables"] > RANK["lake.write"] > RANK["lake.spark"] > RANK["lake"]
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


@pytest.mark.parametrize(
    "package",
    [
        "binlake.ddl",
        "binlake.binlog",
        "binlake.keyindex",
        "binlake.lake.schema",
        "binlake.lake.catalog",
    ],
)
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


def _lines(path: Path) -> int:
    return len(path.read_text("utf-8").splitlines())


def test_no_module_is_over_the_size_limit() -> None:
    over = {str(p.relative_to(PACKAGE)): n for p, n in ((p, _lines(p)) for p in MODULES.values())}
    assert {name: n for name, n in over.items() if n > MAX_MODULE_LINES} == {}


def test_no_folder_holds_too_much_of_the_package_flat() -> None:
    """Each folder's own files (its sub-packages apart) hold at most ``MAX_FLAT_SHARE`` of the
    package's lines: a room that grows past it is split by concern."""
    by_folder: dict[Path, int] = {}
    for path in MODULES.values():
        by_folder[path.parent] = by_folder.get(path.parent, 0) + _lines(path)
    total = sum(by_folder.values())
    heavy = {
        str(folder.relative_to(PACKAGE.parent)): f"{lines / total:.1%}"
        for folder, lines in by_folder.items()
        if lines > MAX_FLAT_SHARE * total
    }
    assert heavy == {}


def test_no_class_name_is_defined_twice() -> None:
    where: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(module)
    assert {name: found for name, found in where.items() if len(found) > 1} == {}
