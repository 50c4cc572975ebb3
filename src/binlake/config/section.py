"""The one statement of each setting: a section of the config file is a frozen dataclass whose
key fields say so with ``setting(kind, parse, default, doc)``, the default stated there only.

``Section.keys()`` reads the keys back from the fields (the loader's and the docs' view: name,
type, parser, default, meaning); a field without ``setting`` (``SourceConfig.password``) is no
key: the section's ``from_values`` fills it in. The loader (``binlake.config``) reads each key
from the environment (``BINLAKE_<SECTION>_<KEY>``), the file or its default, then builds the
section with ``from_values``: ``cls(**values)`` unless the section checks its keys against each
other or against sections built before it (``Loading.section``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, Self, TypeVar

__all__ = ["ENV_PREFIX", "REQUIRED", "Key", "Loading", "Parser", "Section", "setting"]

ENV_PREFIX = "BINLAKE_"

#: The default of a key the file (or the environment) must set.
REQUIRED: Any = object()

#: ``(value, field name, base folder)`` -> the typed value, or a ``ConfigError`` naming the field.
Parser = Callable[[object, str, Path], Any]

_SPEC = "binlake.config.key"

_S = TypeVar("_S", bound="Section")


@dataclass(frozen=True)
class Key:
    """One key: how to parse it from TOML and from text, its default, and what it means."""

    name: str
    kind: str  # str | int | float | bool | path | enum names, for messages and docs
    parse: Parser
    default: Any = REQUIRED
    doc: str = ""

    def env_var(self, section: str) -> str:
        return f"{ENV_PREFIX}{section}_{self.name}".upper()

    def default_in(self, base_dir: Path) -> Any:
        """The default; a path, like a relative path in the file, lies in the file's folder."""
        return base_dir / self.default if isinstance(self.default, Path) else self.default


@dataclass(frozen=True)
class _Spec:
    kind: str
    parse: Parser
    doc: str


def setting(kind: str, parse: Parser, default: Any = REQUIRED, doc: str = "") -> Any:
    """A dataclass field that is a config key: its type for messages and docs (``kind``), its
    parser, its default (``REQUIRED``: none) and its meaning. A dict default is copied per
    instance."""
    metadata = {_SPEC: _Spec(kind, parse, doc)}
    if default is REQUIRED:
        return field(metadata=metadata)
    if isinstance(default, dict):
        return field(default_factory=partial(dict, default), metadata=metadata)
    return field(default=default, metadata=metadata)


def _key(spec_field: Field[Any]) -> Key:
    spec: _Spec = spec_field.metadata[_SPEC]
    if spec_field.default is not MISSING:
        default = spec_field.default
    elif spec_field.default_factory is not MISSING:
        default = spec_field.default_factory()
    else:
        default = REQUIRED
    return Key(spec_field.name, spec.kind, spec.parse, default, spec.doc)


@dataclass(frozen=True)
class Loading:
    """A config being loaded, as a section's ``from_values`` sees it: the environment, the
    folder relative paths start from, and the sections built so far."""

    env: Mapping[str, str]
    base_dir: Path
    built: dict[str, Any] = field(default_factory=dict)

    def section(self, cls: type[_S]) -> _S:
        """The section of type ``cls``, built before the one asking (``Config``'s order)."""
        for built in self.built.values():
            if isinstance(built, cls):
                return built
        raise LookupError(f"{cls.__name__} is built after the section that asks for it")


@dataclass(frozen=True, kw_only=True)
class Section:
    """The base of the sections' dataclasses (frozen, keyword-only)."""

    @classmethod
    def keys(cls) -> tuple[Key, ...]:
        """The section's keys, in the order of its fields."""
        return tuple(_key(f) for f in fields(cls) if _SPEC in f.metadata)

    @classmethod
    def from_values(cls, values: dict[str, Any], loading: Loading) -> Self:
        """The section from its keys' parsed ``values``; sections whose keys are checked
        together, or that hold more than their keys, say how."""
        return cls(**values)
