"""Record the binlog fixtures of the type-coverage unit tests from a real MariaDB.

Starts a throwaway ``MariaDBSandbox`` (ROW format, FULL row image and metadata, CRC32), runs the
workload of ``tests/type_workload.py`` in its own binlog file, and saves under
``tests/fixtures/binlog/``:

* ``types.binlog``: that binlog file, byte for byte as the server wrote it;
* ``types.expected.json``: the row changes it must decode to, computed in Python from the values
  written (never read back), with the column hints (UUID/INET) the decoder needs.

(The comparison with ``mariadb-binlog`` runs live, in tests/integration/test_type_coverage.py.)

Run it again whenever the workload changes:

    .venv/bin/python scripts/record_fixtures.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from binlake_dev.sandbox import MariaDBSandbox  # noqa: E402
from type_workload import all_tables, changes_to_json, run_workload  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "binlog"
DATABASE = "binlake_types"
MAX_FIXTURE_BYTES = 300_000


def record(out_dir: Path) -> Path:
    """Run the workload on a fresh server and write the fixture files; the binlog path."""
    tables = all_tables(large=False)
    with tempfile.TemporaryDirectory(prefix="binlake-fixtures-") as tmp:
        sandbox = MariaDBSandbox(Path(tmp) / "db")
        with sandbox:
            sandbox.execute(f"CREATE DATABASE {DATABASE}")
            first = sandbox.flush_logs()[-1]
            with sandbox.connect(DATABASE, autocommit=False) as conn, conn.cursor() as cursor:
                changes = run_workload(cursor, DATABASE, tables)
            last = sandbox.flush_logs()[-2]
            if first != last:
                raise SystemExit(f"the workload spans {first.name}..{last.name}; expected one file")
            out_dir.mkdir(parents=True, exist_ok=True)
            binlog = out_dir / "types.binlog"
            shutil.copyfile(first, binlog)
    hints = {f"{DATABASE}.{t.name}": t.hints for t in tables if t.hints}
    expected = changes_to_json(changes, hints)
    (out_dir / "types.expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    return binlog


def main() -> int:
    binlog = record(OUT)
    total = sum(p.stat().st_size for p in OUT.glob("types.*"))
    print(f"wrote {binlog} and its expectations: {total} bytes in tests/fixtures/binlog")
    if total > MAX_FIXTURE_BYTES:
        print(f"fixtures exceed {MAX_FIXTURE_BYTES} bytes; shrink the workload", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
