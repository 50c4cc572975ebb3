"""A shop workload for applier crash tests: every transaction touches several tables (orders,
their lines, a key-less audit log), with updates, deletes and primary-key changes; DDL on
demand. Committed from a thread while `binlake replicate` runs and dies."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from binlake_dev.sandbox import MariaDBSandbox

SCHEMA = (
    "CREATE TABLE {db}.orders (id INT PRIMARY KEY, customer VARCHAR(30) NOT NULL, "
    "total DECIMAL(10,2), placed DATETIME(6), extra INT)",
    "CREATE TABLE {db}.order_lines (order_id INT, line INT, sku VARCHAR(20), qty INT, "
    "PRIMARY KEY (order_id, line))",
    "CREATE TABLE {db}.audit (at BIGINT, what VARCHAR(20))",
)


@dataclass
class ShopWorkload:
    source: MariaDBSandbox
    database: str
    seed: int = 7
    next_id: int = 1
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)

    def create(self) -> ShopWorkload:
        self.source.execute(f"CREATE DATABASE {self.database}")
        for statement in SCHEMA:
            self.source.execute(statement.format(db=self.database))
        return self

    def ddl(self, statement: str) -> None:
        self.source.execute(statement.format(db=self.database))

    def run(self, transactions: int, pause_s: float = 0.0) -> None:
        """Commit ``transactions`` transactions, each on orders, order_lines and audit."""
        with self.source.connect(self.database, autocommit=False) as conn, conn.cursor() as cursor:
            for _ in range(transactions):
                self._transaction(cursor)
                conn.commit()
                if pause_s:
                    time.sleep(pause_s)

    def _transaction(self, cursor: object) -> None:
        execute = cursor.execute  # type: ignore[attr-defined]
        order = self.next_id
        self.next_id += 1
        execute(
            "INSERT INTO orders (id, customer, total, placed) VALUES (%s, %s, %s, NOW(6))",
            (order, f"customer {order % 17}", f"{order}.{order % 100:02d}"),
        )
        for line in (1, 2):
            execute(
                "INSERT INTO order_lines VALUES (%s, %s, %s, %s)",
                (order, line, f"sku-{order}-{line}", line),
            )
        execute("INSERT INTO audit VALUES (%s, 'order')", (order,))
        older = self.random.randrange(1, order + 1)
        choice = self.random.random()
        if choice < 0.3:
            execute("UPDATE orders SET total = total + 1 WHERE id = %s", (older,))
            execute("INSERT INTO audit VALUES (%s, 'update')", (older,))
        elif choice < 0.45:
            execute("DELETE FROM order_lines WHERE order_id = %s AND line = 1", (older,))
        elif choice < 0.6:
            execute(
                "UPDATE order_lines SET line = line + 100 WHERE order_id = %s AND line = 2",
                (older,),
            )
        elif choice < 0.65:
            execute("UPDATE orders SET id = id + 1000000 WHERE id = %s", (older,))

    def in_thread(self, transactions: int, pause_s: float) -> threading.Thread:
        def work() -> None:
            try:
                self.run(transactions, pause_s)
            except BaseException as error:  # kept for the test to raise
                self.errors.append(error)

        thread = threading.Thread(target=work, name="shop-workload")
        thread.start()
        return thread
