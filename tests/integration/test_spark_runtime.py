"""The Iceberg runtime cache (``binlake.lake.spark.runtime``) and how a bad runtime is reported.

Uses the real cache ``make spark-deps`` built, copied to a temp folder before anything is damaged.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from binlake.lake.spark.runtime import (
    JACKSON_JAR,
    MANIFEST,
    RUNTIME_JAR,
    cached_iceberg_jars,
    ensure_iceberg_jars,
    file_sha256,
)


@pytest.fixture
def cache_copy(tmp_path: Path) -> Path:
    original = ensure_iceberg_jars()
    folder = tmp_path / "jars"
    folder.mkdir()
    for path in (*original.paths, original.runtime.with_name(MANIFEST)):
        shutil.copy2(path, folder / path.name)
    return folder


def test_cache_is_verified_and_reused(cache_copy: Path) -> None:
    jars = cached_iceberg_jars(cache_copy)
    assert jars is not None and jars.paths == (cache_copy / RUNTIME_JAR, cache_copy / JACKSON_JAR)


def test_a_damaged_jackson_jar_is_rebuilt(cache_copy: Path) -> None:
    jackson = cache_copy / JACKSON_JAR
    good = file_sha256(jackson)
    data = bytearray(jackson.read_bytes())
    data[len(data) // 2] ^= 0xFF
    jackson.write_bytes(bytes(data))
    assert cached_iceberg_jars(cache_copy) is None
    lines: list[str] = []
    ensure_iceberg_jars(cache_copy, report=lines.append)
    assert file_sha256(jackson) == good  # jarjar's output is deterministic
    assert [line.split()[0] for line in lines] == ["relocated"]  # the runtime jar was kept
    assert cached_iceberg_jars(cache_copy) is not None


def test_a_missing_manifest_or_jar_means_a_rebuild(cache_copy: Path) -> None:
    (cache_copy / MANIFEST).unlink()
    assert cached_iceberg_jars(cache_copy) is None
    (cache_copy / JACKSON_JAR).unlink()
    jars = ensure_iceberg_jars(cache_copy)
    assert jars.jackson.is_file() and cached_iceberg_jars(cache_copy) == jars


_START_WITH_RUNTIME_ONLY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from binlake.lake.spark.session import SparkSettings, build_session
    from binlake.errors import SparkSetupError

    settings = SparkSettings(master="local[1]", warehouse=Path(sys.argv[2]), jars=(sys.argv[1],))
    try:
        build_session(settings)
    except SparkSetupError as error:
        print(error.component, "|", error, "|", error.hint)
        sys.exit(3)
    print("started")
    """
)


def test_an_unrepaired_runtime_is_refused_with_the_reason(tmp_path: Path) -> None:
    runtime = ensure_iceberg_jars().runtime  # the PyPI jar as shipped, without its Jackson
    result = subprocess.run(
        [sys.executable, "-c", _START_WITH_RUNTIME_ONLY, str(runtime), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    component, message, hint = result.stdout.strip().split(" | ")
    assert component == "iceberg-jackson"
    assert "lacks its shaded Jackson classes" in message
    assert "make spark-deps" in hint
