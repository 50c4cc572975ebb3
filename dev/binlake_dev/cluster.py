"""A Spark standalone cluster (one master, one worker) from pyspark's own distribution, for the
tests, the demo and the benchmarks.

``SPARK_HOME`` is the installed pyspark package folder (it holds ``bin/spark-class`` and
``jars/``). ``spark-class`` runs Spark's launcher and then ``exec``s the daemon's JVM, so the PID
of the child is the daemon's, and the daemon is stopped by it. Everything binds to 127.0.0.1 on
free ports (the worker's UI port too: its default 8081 would collide between runs); logs and the
worker's work folder (the executors' stdout/stderr, the jars they fetched) live in the
cluster's folder.

Ready without sleeps: the master's JSON page (``http://127.0.0.1:UI/json/``) is polled; the
master is up at ``status == "ALIVE"``, the cluster when it lists the worker ALIVE. The worker
is started only once the master answers (a worker whose first registration fails retries only
after a randomized 5-15 s).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from binlake_dev.procs import cmdline, descendants, spawn, stop_child, wait_for
from binlake_dev.sandbox import free_port

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
START_TIMEOUT_S = 120.0


def pyspark_home() -> Path:
    """The installed pyspark package folder, usable as ``SPARK_HOME``."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed (make venv installs it)")
    home = Path(next(iter(spec.submodule_search_locations)))
    if not (home / "bin" / "spark-class").is_file():
        raise RuntimeError(f"{home} has no bin/spark-class")
    return home


class SparkCluster:
    """A master and one worker in ``base_dir`` (a temporary folder when None)."""

    def __init__(
        self,
        base_dir: Path | None = None,
        *,
        worker_cores: int = 2,
        worker_memory: str = "2g",
        daemon_memory: str = "256m",
    ) -> None:
        self._own_dir = base_dir is None
        self.base_dir = base_dir or Path(tempfile.mkdtemp(prefix="binlake-spark-"))
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.master_port = 0
        self.ui_port = 0
        self.master: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        #: Seconds from start to the master ready, and to the worker registered.
        self.timings: dict[str, float] = {}

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def ui(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    @property
    def work_dir(self) -> Path:
        """The worker's folder: ``app-*/<executor id>/stderr`` is each executor's log."""
        return self.base_dir / "work"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> Self:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.master_port, self.ui_port = free_port(HOST), free_port(HOST)
        args = [MASTER_CLASS, "--host", HOST, "--port", str(self.master_port)]
        self.master = self._daemon("master", [*args, "--webui-port", str(self.ui_port)])
        master = self.master
        wait_for(
            lambda: True if (self.state() or {}).get("status") == "ALIVE" else None,
            timeout_s=START_TIMEOUT_S,
            what=f"Spark master at {self.url}",
            alive=lambda: master.poll() is None,
            log=self.base_dir / "master.log",
        )
        self.timings["master_ready_s"] = time.monotonic() - started
        self.start_worker()
        self.timings["cluster_ready_s"] = time.monotonic() - started
        return self

    def start_worker(self) -> None:
        """Start the worker (again, after ``stop_worker``) and wait until it registered."""
        args = [WORKER_CLASS, self.url, "--host", HOST, "--port", str(free_port(HOST))]
        args += ["--webui-port", str(free_port(HOST)), "--cores", str(self.worker_cores)]
        args += ["--memory", self.worker_memory, "--work-dir", str(self.work_dir)]
        self.worker = self._daemon("worker", args)
        worker = self.worker
        wait_for(
            lambda: True if self.alive_workers() else None,
            timeout_s=START_TIMEOUT_S,
            what=f"Spark worker registering with {self.url}",
            alive=lambda: worker.poll() is None,
            log=self.base_dir / "worker.log",
        )

    def stop(self) -> None:
        """Stop the worker (its executors first), then the master; remove a folder of ours."""
        for pid in self.executor_pids():
            _kill(pid)
        if self.worker is not None:
            stop_child(self.worker)
            self.worker = None
        if self.master is not None:
            stop_child(self.master)
            self.master = None
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _daemon(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        home = pyspark_home()
        env = dict(os.environ)
        env |= {
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": str(self.base_dir),
            "SPARK_WORKER_DIR": str(self.work_dir),
        }
        argv = [str(home / "bin" / "spark-class"), *args]
        return spawn(argv, log=self.base_dir / f"{name}.log", env=env, cwd=self.base_dir)

    # ---- what it runs ------------------------------------------------------------------------

    def state(self) -> dict[str, Any] | None:
        """The master's JSON status (None while it does not answer)."""
        try:
            with urllib.request.urlopen(f"{self.ui}/json/", timeout=2.0) as reply:
                data = json.loads(reply.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in (self.state() or {}).get("workers", []) if w.get("state") == "ALIVE"]

    def active_apps(self) -> list[dict[str, Any]]:
        return list((self.state() or {}).get("activeapps", []))

    def executor_pids(self) -> list[int]:
        """The executor JVMs the worker runs (its ``CoarseGrainedExecutorBackend``
        descendants)."""
        if self.worker is None or self.worker.poll() is not None:
            return []
        return [p for p in descendants(self.worker.pid) if EXECUTOR_CLASS in cmdline(p)]

    def wait_apps_gone(self, timeout_s: float = 30.0) -> None:
        """Wait until the master runs no application (a killed driver's cores are freed
        within a fraction of a second)."""
        wait_for(
            lambda: True if not self.active_apps() else None,
            timeout_s=timeout_s,
            what="Spark applications to end",
        )


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
