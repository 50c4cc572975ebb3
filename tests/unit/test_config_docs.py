"""docs/configuration.md's key tables against the code: every key the code knows is documented
under its section with its type, default and environment variable as the code states them,
and the docs list no key the code does not know."""

from __future__ import annotations

import re
from pathlib import Path

from binlake.config import describe_keys

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
SECTION = re.compile(r"^### \[(\w+)\]")
ROW = re.compile(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \| `(BINLAKE_\w+)` \|")
#: What a default's cell may add after the default itself: "134217728 (128 MiB)".
ANNOTATION = re.compile(r"\s+\([^()]*\)$")


def documented_keys() -> dict[str, tuple[str, str, str]]:
    """section.key -> (type, default, environment variable) from the docs' key tables; the
    default without its annotation and markdown escapes."""
    rows: dict[str, tuple[str, str, str]] = {}
    section = None
    for line in DOCS.read_text("utf-8").splitlines():
        if heading := SECTION.match(line):
            section = heading.group(1)
        elif (row := ROW.match(line)) and section is not None:
            key, kind, default, env_var = (part.strip() for part in row.groups())
            default = ANNOTATION.sub("", default).replace("\\*", "*")
            assert f"{section}.{key}" not in rows, f"{section}.{key} is documented twice"
            rows[f"{section}.{key}"] = (kind, default, env_var)
    return rows


def test_every_key_is_documented_with_the_codes_type_default_and_variable() -> None:
    documented = documented_keys()
    for name, kind, default, env_var, _doc in describe_keys():
        assert name in documented, f"{name} is not in docs/configuration.md"
        assert documented[name] == (kind, default, env_var), name


def test_the_docs_document_no_key_the_code_does_not_know() -> None:
    known = {name for name, *_ in describe_keys()}
    assert set(documented_keys()) - known == set()


def test_the_docs_reader_reads_every_key_table() -> None:
    """The reader is not vacuous: it finds every section's table and the annotated defaults."""
    documented = documented_keys()
    assert {name.split(".")[0] for name in documented} == {
        name.split(".")[0] for name, *_ in describe_keys()
    }
    assert documented["receiver.max_relay_file_size"][1] == "134217728"
    assert documented["tables.include"][1] == '["*.*"]'
