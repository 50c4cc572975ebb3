# binlake developer and CI entry points (GNU make, Debian 12, run as root).
#
#   make deps        system packages (MariaDB server and client, Java 17, jarjar, the SQLite JDBC
#                    driver of the embedded catalog, PostgreSQL server and its JDBC driver for the
#                    JDBC catalog tests, FUSE 3 for the power-cut file system, a C compiler and
#                    Python's headers for the compiled hot path), only when missing
#   make venv        .venv with python 3.11 and the editable package with its dev extra (pyspark),
#                    its hot path compiled by mypyc in place (setup.py; pure Python without a
#                    compiler), rebuilt when a compiled module's source changes,
#                    plus dev/ (binlake-dev: the MariaDB sandbox of the tests, demo and benches,
#                    and the tests' other readers of the lake: PyIceberg, DuckDB and its iceberg
#                    and avro extensions, all from PyPI: dev/pyproject.toml)
#   make spark-deps  deps + venv, then the repaired Iceberg runtime in ~/.cache/binlake/jars
#                    (python -m binlake.lake.spark.runtime: builds once, verifies checksums after)
#   make test        deps + venv + spark-deps, then the fast test suite, then the property tier
#                    again on the pure-Python fallback (BINLAKE_PURE_PYTHON=1)
#   make lint        ruff check, ruff format --check, mypy --strict
#   make power-cut   deps + venv + spark-deps, then the power-cut tier (issue #38): every test
#                    marked powercut (kill -9 then a power cut at each crash point, the FUSE
#                    power-cut file system's own tests, POWER_CUTS=200 cuts at random instants
#                    of the soak's workload), the slow ones included; the state folder is on the
#                    power-cut file system, and for the Spark-side points and the soak the
#                    embedded warehouse too (Iceberg's files, catalog.sqlite and its WAL)
#   make soak        the slow soak: kill -9 at random during a mixed workload with DDL, plus
#                    network faults, source restarts and torn relay tails; MINUTES=5 [SEED=n]
#   make demo        deps + venv + spark-deps, then scripts/demo.py
#   make bench       deps + venv + spark-deps + bench extra + strace (bench/fsyncs.py), then
#                    every bench/*.py with its defaults (docs/benchmarks.md; not the
#                    helper bench/_common.py)
#   make clean       remove .venv and caches (not the jar cache in ~/.cache/binlake)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

VENV := .venv
VENV_PY := $(VENV)/bin/python
DEV_STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

# The first of python3 / python3.11 that is a 3.11 interpreter (pyenv's python3 is 3.11.7 here).
PYTHON ?= $(shell for p in python3 python3.11; do \
	  if command -v $$p >/dev/null 2>&1 && \
	     $$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then \
	    command -v $$p; break; \
	  fi; \
	done)

# mariadbd lives in /usr/sbin, which is not on every PATH.
export PATH := $(PATH):/usr/sbin:/usr/local/sbin
export DEBIAN_FRONTEND := noninteractive

APT_PACKAGES := mariadb-server mariadb-client
# Spark needs Java (8/11/17; Debian 12 has 17); jarjar relocates Jackson for the Iceberg runtime.
JAVA_APT_PACKAGE := openjdk-17-jre-headless
JARJAR_JAR := /usr/share/java/jarjar.jar
JARJAR_APT_PACKAGE := libjarjar-java
# The embedded catalog is Iceberg's JDBC catalog on an SQLite file (binlake.lake.catalog.embedded).
SQLITE_JDBC_JAR := /usr/share/java/sqlite-jdbc.jar
SQLITE_JDBC_APT_PACKAGE := libxerial-sqlite-jdbc-java
# Iceberg's JDBC catalog in the tests: a throwaway PostgreSQL server (binlake_dev.postgres runs
# it in a temporary folder; Debian's own cluster is not created) and the driver's jar.
POSTGRES_APT_PACKAGE := postgresql
PG_JDBC_JAR := /usr/share/java/postgresql.jar
PG_JDBC_APT_PACKAGE := libpostgresql-jdbc-java
# The power-cut file system of the tests (binlake_dev.powercut): fusermount3, and libfuse 3,
# which its Python binding (mfusepy, dev/pyproject.toml) loads.
FUSE_APT_PACKAGES := fuse3 libfuse3-3
# mypyc's C (setup.py): a C compiler, and the headers of $(PYTHON) (pyenv's Pythons have their
# own; a Debian python3 needs python3-dev). Without them binlake installs and runs pure Python.
COMPILER_APT_PACKAGE := build-essential
PYTHON_HEADERS_APT_PACKAGE := python3-dev

# Extra pytest arguments, e.g. `make test PYTEST_ARGS="tests/unit -x"`.
PYTEST_ARGS ?=
# Test processes of `make test` (pytest-xdist, one test file per process at a time: a module's
# servers stay in one process): one per core, at most 4 (each starts its own MariaDB, Spark and
# PostgreSQL). TEST_WORKERS=0 runs the suite in this process alone.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)

# Minutes of `make soak` (replicate killed at random moments during a workload with DDL, with
# proxy faults, source restarts and torn relay tails injected at random; it prints its kills by
# where they landed: starting, receiving, applying), and its random seed (printed by every run;
# SEED=n replays its random choices, timing aside).
MINUTES ?= 5
SEED ?=

# Power cuts at random instants of `make power-cut` (tests/crash/test_applier_soak.py).
POWER_CUTS ?= 200

.PHONY: deps venv spark-deps test power-cut soak lint demo bench bench-deps clean

deps:
	@missing=""; \
	if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-binlog >/dev/null 2>&1 \
	    && command -v mariadb-install-db >/dev/null 2>&1; then \
	  echo "deps: MariaDB already installed ($$(mariadbd --version))"; \
	else \
	  missing="$(APT_PACKAGES)"; \
	fi; \
	if command -v java >/dev/null 2>&1; then \
	  echo "deps: Java already installed ($$(java -version 2>&1 | head -n 1))"; \
	else \
	  missing="$$missing $(JAVA_APT_PACKAGE)"; \
	fi; \
	if [ -f $(JARJAR_JAR) ]; then \
	  echo "deps: jarjar already installed ($(JARJAR_JAR))"; \
	else \
	  missing="$$missing $(JARJAR_APT_PACKAGE)"; \
	fi; \
	if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then \
	  echo "deps: PostgreSQL already installed ($$(ls -d /usr/lib/postgresql/*/bin | tail -n 1))"; \
	else \
	  missing="$$missing $(POSTGRES_APT_PACKAGE)"; \
	  mkdir -p /etc/postgresql-common/createcluster.d; \
	  echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/binlake.conf; \
	fi; \
	if [ -f $(PG_JDBC_JAR) ]; then \
	  echo "deps: PostgreSQL JDBC driver already installed ($(PG_JDBC_JAR))"; \
	else \
	  missing="$$missing $(PG_JDBC_APT_PACKAGE)"; \
	fi; \
	if [ -f $(SQLITE_JDBC_JAR) ]; then \
	  echo "deps: SQLite JDBC driver already installed ($(SQLITE_JDBC_JAR))"; \
	else \
	  missing="$$missing $(SQLITE_JDBC_APT_PACKAGE)"; \
	fi; \
	if command -v fusermount3 >/dev/null 2>&1 \
	    && ldconfig -p | grep 'libfuse3\.so\.3' >/dev/null; then \
	  echo "deps: FUSE 3 already installed ($$(fusermount3 --version 2>&1 | head -n 1))"; \
	else \
	  missing="$$missing $(FUSE_APT_PACKAGES)"; \
	fi; \
	if command -v gcc >/dev/null 2>&1 && command -v make >/dev/null 2>&1; then \
	  echo "deps: C compiler already installed ($$(gcc --version | head -n 1))"; \
	else \
	  missing="$$missing $(COMPILER_APT_PACKAGE)"; \
	fi; \
	if [ -z "$(PYTHON)" ] || $(PYTHON) -c 'import os, sys, sysconfig; \
	    sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then \
	  echo "deps: Python headers already installed (or no python 3.11 yet)"; \
	else \
	  missing="$$missing $(PYTHON_HEADERS_APT_PACKAGE)"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  mkdir -p /usr/share/man/man1; \
	  apt-get update -q; \
	  apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(VENV_PY):
	@test -n "$(PYTHON)" || { echo "venv: no python 3.11 found (tried python3, python3.11)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(DEV_STAMP): pyproject.toml setup.py dev/pyproject.toml | $(VENV_PY)
	$(VENV_PY) -m pip install -q -e '.[dev]' -e ./dev
	@touch $@

# The compiled modules and C extensions (binlake.compiled.BUILT_MODULES) rebuilt in place when
# one of their sources changed, or when the first install left none in src/ (fresh clone: the
# `pip install -e '.[dev]' -e ./dev` above compiled, but no module's extension reached src/, so
# the suite ran pure Python): binlake refuses a stale or missing build (runs pure Python), so
# the tests would not run the compiled code. Without a compiler this is the quick pure build.
COMPILED_STAMP := $(VENV)/.compiled
COMPILED_SOURCES = $(shell $(PYTHON) -c 'import runpy; plan = runpy.run_path("src/binlake/compiled.py"); \
	print(*(p.relative_to(plan["PACKAGE"].parents[1]) for m in plan["BUILT_MODULES"] for p in plan["source_paths"](m)))')
$(COMPILED_STAMP): $(DEV_STAMP) src/binlake/compiled.py $(COMPILED_SOURCES)
	@if $(VENV_PY) -c 'import sys, binlake.compiled as c; sys.exit(c.pure_reason() is not None)'; \
	then echo "venv: compiled modules current"; \
	else $(VENV_PY) -m pip install -q --no-deps -e .; fi
	@touch $@

venv: $(DEV_STAMP) $(COMPILED_STAMP)

spark-deps: deps venv
	@$(VENV_PY) -m binlake.lake.spark.runtime

# Our own modules byte-compiled before a run: pip never compiles an editable install, and with
# PYTHONDONTWRITEBYTECODE set (as on these machines) each of the suite's binlake processes and
# Spark's Python workers compiled them again (0.6 s of CPU a process). Changed files only.
COMPILE_OURS = $(VENV_PY) -m compileall -q src dev/binlake_dev >/dev/null

test: deps venv spark-deps
	@$(VENV_PY) -m binlake_dev.jvm_archive
	@$(COMPILE_OURS)
	@rc=0; $(VENV)/bin/pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile --durations=15 \
	  $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5); failing" >&2; fi; \
	[ $$rc -eq 0 ] || exit $$rc; \
	echo "make test: the property tier again, on the pure-Python fallback"; \
	BINLAKE_PURE_PYTHON=1 $(VENV)/bin/pytest -m "property and not slow" -n $(TEST_WORKERS) \
	  --dist loadfile tests/property

# The tier on the test processes first, then the random-instant soak alone (its counts printed).
POWER_CUT_SOAK := tests/crash/test_applier_soak.py::test_power_cuts_at_random_instants_during_a_mixed_workload_lose_nothing_and_double_nothing
power-cut: deps venv spark-deps
	@$(VENV_PY) -m binlake_dev.jvm_archive
	@$(COMPILE_OURS)
	@rc=0; $(VENV)/bin/pytest -m powercut -n $(TEST_WORKERS) --dist loadfile --durations=15 \
	  --deselect '$(POWER_CUT_SOAK)[long-cut]' tests/crash tests/powercut $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make power-cut: pytest collected no tests (exit 5); failing" >&2; fi; \
	[ $$rc -eq 0 ] || exit $$rc; \
	POWER_CUTS=$(POWER_CUTS) $(VENV)/bin/pytest -s '$(POWER_CUT_SOAK)[long-cut]' $(PYTEST_ARGS)

soak: deps venv spark-deps
	@$(COMPILE_OURS)
	SOAK_MINUTES=$(MINUTES) $(if $(SEED),SOAK_SEED=$(SEED)) \
	  $(VENV)/bin/pytest -m slow -s tests/crash/test_applier_soak.py $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

demo: deps venv spark-deps
	$(VENV_PY) scripts/demo.py

$(BENCH_STAMP): pyproject.toml $(DEV_STAMP)
	$(VENV_PY) -m pip install -q -e '.[dev,bench]'
	@touch $@

# bench/fsyncs.py counts the sync system calls of `binlake replicate` and its JVM with strace.
bench-deps:
	@if command -v strace >/dev/null 2>&1; then \
	  echo "bench-deps: strace already installed ($$(strace -V | head -n 1))"; \
	else \
	  echo "bench-deps: installing strace"; \
	  apt-get update -q; \
	  apt-get install -y -q --no-install-recommends strace; \
	fi

bench: deps venv spark-deps bench-deps $(BENCH_STAMP)
	@shopt -s nullglob; scripts=(bench/[!_]*.py); \
	if [ $${#scripts[@]} -eq 0 ]; then echo "bench: no bench/*.py yet"; fi; \
	for script in "$${scripts[@]}"; do \
	  echo "== $$script"; \
	  $(VENV_PY) "$$script"; \
	done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build src/*.egg-info
	find src -name '*.so' -delete
	rm -f src/binlake/compiled.sha256
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
