"""Another writer of the lake, in its own process and Spark session, for the tests of issue 11
(part 1): it runs SQL statements on the embedded catalog in a loop, as a maintenance job or an
analyst would, until a stop file appears.

    python tests/concurrent_writer.py WAREHOUSE STOP_FILE STATEMENT [EVERY:STATEMENT ...]

A plain ``STATEMENT`` runs every round; ``EVERY:STATEMENT`` every EVERY-th round. A statement
that fails (another writer, binlake, committed first) is counted and the loop goes on. It prints
``ready`` once its session is up, ``ok ROUND INDEX`` for each statement that committed (INDEX:
its place on the command line), and ``commits N failures M`` at the end.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from binlake.lake.spark.session import SparkSettings, build_session, stop_session


def main(warehouse: str, stop_file: str, statements: list[str]) -> int:
    spark = build_session(SparkSettings(app_name="binlake-other-writer", warehouse=Path(warehouse)))
    plan = []
    for text in statements:
        every, _, statement = text.partition(":") if text[:1].isdigit() else ("1", "", text)
        plan.append((int(every), statement))
    print("ready", flush=True)
    commits = failures = 0
    round_ = 0
    try:
        while not Path(stop_file).exists():
            round_ += 1
            for index, (every, statement) in enumerate(plan):
                if round_ % every:
                    continue
                try:
                    spark.sql(statement.replace("{n}", str(round_))).collect()
                    commits += 1
                    print(f"ok {round_} {index}", flush=True)
                except Exception as error:  # a conflict with binlake: counted, the loop goes on
                    failures += 1
                    print(f"failed: {str(error).splitlines()[0][:200]}", file=sys.stderr)
            time.sleep(0.01)
    finally:
        print(f"commits {commits} failures {failures}", flush=True)
        stop_session(spark)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
