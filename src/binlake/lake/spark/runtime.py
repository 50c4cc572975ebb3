"""Iceberg's Spark runtime for the embedded default: fetched, repaired once, cached, verified.

No Maven repository is reachable where binlake is built and tested, so the embedded default
takes Apache Iceberg's ``iceberg-spark-runtime-3.5_2.12`` jar from the PyPI package
``snowpark-connect-deps-iceberg`` (pinned, and the jar's SHA-256 pinned too). That copy lacks
Iceberg's shaded Jackson classes (``org/apache/iceberg/shaded/com/fasterxml/jackson/...``): the
first CREATE TABLE would fail with NoClassDefFoundError. They are rebuilt from pyspark's own
jackson-core, jackson-databind and jackson-annotations jars, relocated with Debian's jarjar
(package ``libjarjar-java``), into a second jar that goes on ``spark.jars`` beside the runtime.

Where Maven is reachable users set ``spark.jars.packages`` instead; ``binlake.lake.spark.session``
only uses this cache when the configuration names no Iceberg runtime of its own.

The wheel is fetched with ``pip download`` into a temporary folder, not installed: it holds
85 MB of jars (Scala 2.12 and 2.13 builds) of which one is used, and users who bring their own
runtime need none of it. If the package is installed anyway, its jar is used without download.

The cache (``$BINLAKE_CACHE_DIR``, else ``$XDG_CACHE_HOME/binlake``, else ``~/.cache/binlake``;
jars in its ``jars/``) holds both jars and ``manifest.json`` with their SHA-256, sizes and the
inputs they were built from. Every use checks the checksums; a missing or damaged jar, or other
inputs (another pyspark's Jackson), rebuild it. Builds hold an ``flock`` so two processes never
build at once; files are written under temporary names and renamed, the manifest last.

``python -m binlake.lake.spark.runtime`` builds or checks the cache (``make spark-deps`` runs it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.errors import BinlakeError, SparkSetupError
from binlake.storage.lock import folder_lock

ICEBERG_DIST = "snowpark-connect-deps-iceberg"
ICEBERG_DIST_VERSION = "1.0.3"
RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
RUNTIME_JAR_SHA256 = "5b30080c7bbbced0fb0900894b7ea0200b1bbb2e4c355ebe727baafaf49c16f6"
JACKSON_JAR = "iceberg-shaded-jackson.jar"
JARJAR = Path("/usr/share/java/jarjar.jar")
#: The SQLite JDBC driver of the embedded catalog (Debian's ``libxerial-sqlite-jdbc-java``).
SQLITE_JDBC_JAR = Path("/usr/share/java/sqlite-jdbc.jar")
SHADED_JACKSON = "org/apache/iceberg/shaded/com/fasterxml/jackson/"
MANIFEST = "manifest.json"
#: Bump when the build of the cache changes: older caches are rebuilt.
CACHE_FORMAT = 2

_JACKSON_ARTIFACTS = ("jackson-core", "jackson-databind", "jackson-annotations")
_RUNTIME_CLASSES = (
    "org/apache/iceberg/spark/SparkCatalog.class",
    "org/apache/iceberg/spark/CommitMetadata.class",
    "org/apache/iceberg/spark/extensions/IcebergSparkSessionExtensions.class",
)
_JACKSON_CLASSES = (
    SHADED_JACKSON + "core/JsonFactory.class",
    SHADED_JACKSON + "databind/ObjectMapper.class",
    SHADED_JACKSON + "annotation/JsonProperty.class",
)
_RELOCATION_RULE = (
    "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n"
)
_CHUNK = 1 << 20
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

Report = Callable[[str], None]


@dataclass(frozen=True)
class IcebergJars:
    """The two jars of the embedded Iceberg runtime, verified."""

    runtime: Path
    jackson: Path

    @property
    def paths(self) -> tuple[Path, Path]:
        return (self.runtime, self.jackson)


def cache_root() -> Path:
    """binlake's cache folder (not created)."""
    explicit = os.environ.get("BINLAKE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "binlake"


def jar_cache_dir() -> Path:
    return cache_root() / "jars"


def find_java() -> Path:
    """The ``java`` binary: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return Path(home) / "bin" / "java"
    found = shutil.which("java")
    if found is None:
        raise SparkSetupError(
            "Java is not installed (no java on PATH and no JAVA_HOME); Spark needs Java 17",
            hint="apt-get install openjdk-17-jre-headless (or `make spark-deps`), or set JAVA_HOME",
            component="java",
        )
    return Path(found)


def pyspark_jars_dir() -> Path:
    """The jars folder of the installed pyspark (found without importing pyspark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkSetupError(
            "pyspark is not installed",
            hint="pip install 'binlake[spark]' (make venv installs it with the dev extra)",
            component="pyspark",
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not folder.is_dir():
        raise SparkSetupError(f"pyspark has no jars folder at {folder}", component="pyspark")
    return folder


def jackson_jars(folder: Path) -> list[Path]:
    """pyspark's jackson-core, jackson-databind and jackson-annotations jars, in that order."""
    out = []
    for artifact in _JACKSON_ARTIFACTS:
        pattern = re.compile(re.escape(artifact) + r"-\d[\w.\-]*\.jar$")
        matches = sorted(p for p in folder.iterdir() if pattern.match(p.name))
        if len(matches) != 1:
            raise SparkSetupError(
                f"expected one {artifact} jar in {folder}, found {len(matches)}",
                component="pyspark",
            )
        out.append(matches[0])
    return out


def sqlite_jdbc_jar() -> Path:
    """The SQLite JDBC driver jar of the embedded catalog (``$BINLAKE_SQLITE_JDBC_JAR``, else
    Debian's)."""
    path = Path(os.environ.get("BINLAKE_SQLITE_JDBC_JAR") or SQLITE_JDBC_JAR)
    if not path.is_file():
        raise SparkSetupError(
            f"the SQLite JDBC driver of the embedded catalog is missing ({path})",
            hint="apt-get install libxerial-sqlite-jdbc-java (or `make spark-deps`), or set "
            "BINLAKE_SQLITE_JDBC_JAR to an org.xerial sqlite-jdbc jar",
            component="sqlite-jdbc",
        )
    return path


# ---- the cache --------------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _expected_inputs() -> dict[str, Any]:
    return {
        "format": CACHE_FORMAT,
        "runtime_sha256": RUNTIME_JAR_SHA256,
        "jackson_inputs": [p.name for p in jackson_jars(pyspark_jars_dir())],
    }


def cached_iceberg_jars(cache: Path | None = None) -> IcebergJars | None:
    """The cached jars if present, complete and built from today's inputs; else None."""
    folder = cache or jar_cache_dir()
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("inputs") != _expected_inputs():
        return None
    files = manifest.get("files")
    if not isinstance(files, dict):
        return None
    for name in (RUNTIME_JAR, JACKSON_JAR):
        entry = files.get(name)
        path = folder / name
        if not isinstance(entry, dict) or not path.is_file():
            return None
        if path.stat().st_size != entry.get("size") or file_sha256(path) != entry.get("sha256"):
            return None
    return IcebergJars(folder / RUNTIME_JAR, folder / JACKSON_JAR)


def ensure_iceberg_jars(cache: Path | None = None, report: Report | None = None) -> IcebergJars:
    """The verified cached jars, built first if missing, damaged or stale."""
    folder = cache or jar_cache_dir()
    found = cached_iceberg_jars(folder)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder):
        found = cached_iceberg_jars(folder)  # another process may have built it meanwhile
        if found is not None:
            return found
        return _build(folder, report or (lambda _message: None))


def _build(folder: Path, report: Report) -> IcebergJars:
    (folder / MANIFEST).unlink(missing_ok=True)
    runtime = folder / RUNTIME_JAR
    if not runtime.is_file() or file_sha256(runtime) != RUNTIME_JAR_SHA256:
        started = time.monotonic()
        _fetch_runtime(runtime)
        report(f"fetched {RUNTIME_JAR} in {time.monotonic() - started:.1f} s")
    _check_classes(runtime, _RUNTIME_CLASSES)
    started = time.monotonic()
    jackson = folder / JACKSON_JAR
    count = _build_shaded_jackson(jackson_jars(pyspark_jars_dir()), jackson)
    report(
        f"relocated {count} Jackson classes into {JACKSON_JAR} in "
        f"{time.monotonic() - started:.1f} s"
    )
    files = {
        path.name: {"sha256": file_sha256(path), "size": path.stat().st_size}
        for path in (runtime, jackson)
    }
    manifest = {"inputs": _expected_inputs(), "files": files}
    _write_atomically(folder / MANIFEST, json.dumps(manifest, indent=2).encode())
    return IcebergJars(runtime, jackson)


def _write_atomically(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


# ---- the runtime jar ------------------------------------------------------------------------


def _installed_runtime() -> Path | None:
    """The runtime jar of an installed ``snowpark-connect-deps-iceberg``, if any."""
    try:
        dist = importlib.metadata.distribution(ICEBERG_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == RUNTIME_JAR:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    return None


def _fetch_runtime(target: Path) -> None:
    """Copy the runtime jar from the installed package or from a downloaded wheel to
    ``target``, checking its SHA-256."""
    temp = target.with_name(f".{target.name}.tmp")
    installed = _installed_runtime()
    if installed is not None:
        shutil.copyfile(installed, temp)
    else:
        with tempfile.TemporaryDirectory(prefix="binlake-wheel-") as download:
            wheel = _download_wheel(Path(download))
            _extract_member(wheel, f"snowpark_connect_deps_iceberg/jars/{RUNTIME_JAR}", temp)
    digest = file_sha256(temp)
    if digest != RUNTIME_JAR_SHA256:
        temp.unlink()
        raise SparkSetupError(
            f"{RUNTIME_JAR} from {ICEBERG_DIST} {ICEBERG_DIST_VERSION} has SHA-256 {digest}, "
            f"expected {RUNTIME_JAR_SHA256}",
            hint="the package on the index is not the one binlake was tested with; set "
            "spark.jars.packages or spark.jars to an Iceberg runtime in [spark]",
            component="iceberg-runtime",
        )
    os.replace(temp, target)


def _download_wheel(folder: Path) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "--dest", str(folder), f"{ICEBERG_DIST}=={ICEBERG_DIST_VERSION}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(folder.glob("*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise SparkSetupError(
            f"pip could not download {ICEBERG_DIST}=={ICEBERG_DIST_VERSION}: {last}",
            hint="binlake needs PyPI once to fetch the Iceberg runtime; or set "
            "spark.jars.packages / spark.jars to an Iceberg runtime in [spark]",
            component="iceberg-runtime",
        )
    return wheels[0]


def _extract_member(archive: Path, member: str, target: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as wheel, wheel.open(member) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, _CHUNK)
    except (KeyError, zipfile.BadZipFile) as error:
        raise SparkSetupError(
            f"{archive.name} has no readable {member}: {error}", component="iceberg-runtime"
        ) from None


def _check_classes(jar: Path, required: tuple[str, ...]) -> None:
    try:
        with zipfile.ZipFile(jar) as archive:
            names = set(archive.namelist())
    except zipfile.BadZipFile as error:
        raise SparkSetupError(f"{jar} is not a jar: {error}", component="iceberg-runtime") from None
    missing = [name for name in required if name not in names]
    if missing:
        raise SparkSetupError(f"{jar} lacks {', '.join(missing)}", component="iceberg-runtime")


# ---- the shaded Jackson jar -------------------------------------------------------------------


def _build_shaded_jackson(sources: list[Path], target: Path) -> int:
    """Relocate the classes of ``sources`` under Iceberg's shaded package into ``target``;
    returns the number of classes. Multi-release variants, module-info and service files are
    left out: the base classes run on every Java version."""
    java = find_java()
    if not JARJAR.is_file():
        raise SparkSetupError(
            f"{JARJAR} is missing: binlake needs jarjar to repair the Iceberg runtime",
            hint="apt-get install libjarjar-java (or `make spark-deps`)",
            component="jarjar",
        )
    with tempfile.TemporaryDirectory(prefix="binlake-jarjar-") as work:
        merged = Path(work) / "jackson.jar"
        count = _merge_classes(sources, merged)
        rules = Path(work) / "rules.txt"
        rules.write_text(_RELOCATION_RULE)
        temp = target.with_name(f".{target.name}.tmp")
        command = [str(java), "-jar", str(JARJAR), "process", str(rules), str(merged), str(temp)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SparkSetupError(
                f"jarjar failed (exit {result.returncode}): {result.stderr.strip()[-500:]}",
                component="jarjar",
            )
    _check_relocated(temp, count)
    os.replace(temp, target)
    return count


def _merge_classes(sources: list[Path], target: Path) -> int:
    count = 0
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for source in sources:
            with zipfile.ZipFile(source) as jar:
                for name in jar.namelist():
                    if name.startswith("com/fasterxml/jackson/") and name.endswith(".class"):
                        # A fixed timestamp: the same inputs give the same bytes, so the same hash.
                        entry = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
                        out.writestr(entry, jar.read(name), zipfile.ZIP_DEFLATED)
                        count += 1
    return count


def _check_relocated(jar: Path, count: int) -> None:
    with zipfile.ZipFile(jar) as archive:
        bad = archive.testzip()
        classes = [n for n in archive.namelist() if n.endswith(".class")]
    stray = [n for n in classes if not n.startswith(SHADED_JACKSON)]
    missing = [n for n in _JACKSON_CLASSES if n not in classes]
    if bad is not None or stray or missing or len(classes) != count:
        raise SparkSetupError(
            f"the relocated Jackson jar is wrong: {len(classes)} classes of {count}, "
            f"damaged {bad}, outside the shaded package {stray[:3]}, missing {missing}",
            component="jarjar",
        )


# ---- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m binlake.lake.spark.runtime",
        description="Fetch, repair and cache the Iceberg Spark runtime (idempotent).",
    )
    parser.add_argument("--cache", type=Path, help="jar cache folder (default: %(default)s)")
    parser.add_argument(
        "--check", action="store_true", help="only verify the cache; exit 1 if it needs a build"
    )
    args = parser.parse_args(argv)
    folder: Path = args.cache or jar_cache_dir()
    if args.check:
        found = cached_iceberg_jars(folder)
        print(f"iceberg jars: {'ok' if found else 'missing or stale'} in {folder}")
        return 0 if found else 1
    started = time.monotonic()
    try:
        jars = ensure_iceberg_jars(folder, report=lambda line: print(f"iceberg jars: {line}"))
    except BinlakeError as error:
        print(f"error: {error}\nhint: {error.hint}", file=sys.stderr)
        return 69
    print(f"iceberg jars: ready in {folder} ({time.monotonic() - started:.1f} s)")
    for path in jars.paths:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
