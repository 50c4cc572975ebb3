"""What the bench scripts share (not a bench: ``make bench`` runs ``bench/[!_]*.py``)."""

from __future__ import annotations

from pathlib import Path

from binlake_dev.sandbox import MariaDBSandbox


def write_config(
    folder: Path,
    sandbox: MariaDBSandbox,
    *,
    receiver: str = "",
    tables: str = "",
    applier: str = "",
    database: str = "bench",
    extra: str = "",
) -> Path:
    """``folder/binlake.toml``: ``sandbox`` as the source, the state folder and the warehouse in
    ``folder``, the tables of database ``database``. ``receiver``, ``tables`` and ``applier``
    are more lines of those sections, ``extra`` more sections."""
    path = folder / "binlake.toml"
    path.write_text(
        "[source]\n"
        'host = "127.0.0.1"\n'
        f"port = {sandbox.port}\n"
        'user = "root"\n'
        "server_id = 4243\n"
        "heartbeat_period_s = 0.5\n"
        "[state]\n"
        f'dir = "{folder / "state"}"\n'
        "[receiver]\n"
        "progress_interval_s = 5\n"
        f"{receiver}"
        "[target]\n"
        f'warehouse = "{folder / "warehouse"}"\n'
        "[tables]\n"
        f'include = ["{database}.*"]\n'
        f"{tables}"
        "[applier]\n"
        f"{applier}"
        f"{extra}"
    )
    return path
