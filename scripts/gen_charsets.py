"""Regenerate the collation table in ``src/binlake/binlog/encodings/charsets.py`` and check its
codecs.

Starts a throwaway MariaDB (``binlake_dev.sandbox``), reads ``information_schema.COLLATIONS`` and
rewrites the block between the ``BEGIN GENERATED`` / ``END GENERATED`` markers of charsets.py.
With ``--verify`` it also asks the server to convert every single byte, every two-byte sequence
with a high lead byte and every ``8F xx yy`` sequence of each supported charset to utf8mb4, and
compares the answers with ``binlake.binlog.encodings.charsets.decode_text``; it prints one line per
charset (sequences the server accepts that we reject are listed as "we reject", the reverse as "we
accept").

    .venv/bin/python scripts/gen_charsets.py [--verify]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from pathlib import Path

from binlake.binlog.encodings.charsets import CHARSET_CODECS, decode_text
from binlake.binlog.errors import ValueDecodeError
from binlake_dev.sandbox import MariaDBSandbox

CHARSETS_PY = Path(__file__).resolve().parent.parent / "src/binlake/binlog/encodings/charsets.py"
BEGIN = "# BEGIN GENERATED"
END = "# END GENERATED"
BATCH = 5000
#: Wide charsets: only whole code units are compared (the server pads partial ones on CAST).
UNIT = {"ucs2": 2, "utf16": 2, "utf16le": 2, "utf32": 4}


def collation_block(rows: list[tuple[int, str, str]]) -> str:
    """The generated Python source for the collation table."""
    entries = " ".join(f"{cid}:{charset}:{name}" for cid, charset, name in rows)
    wrapped = textwrap.wrap(entries, width=92, break_on_hyphens=False)
    body = "\n".join(f"    {line}" for line in wrapped)
    return f'_COLLATION_DATA = """\n{body}\n"""\n'


def rewrite(rows: list[tuple[int, str, str]], version: str) -> None:
    text = CHARSETS_PY.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    note = (
        " by `python scripts/gen_charsets.py`; do not edit by hand\n"
        f"# SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS\n"
        f"# on MariaDB {version}, as id:charset:collation\n"
    )
    CHARSETS_PY.write_text(head + BEGIN + note + collation_block(rows) + END + tail)


def sequences() -> list[bytes]:
    out = [bytes((a,)) for a in range(0x80, 0x100)]
    out += [bytes((a, b)) for a in range(0x80, 0x100) for b in range(0x20, 0x100) if b != 0x3F]
    out += [bytes((0x8F, a, b)) for a in range(0xA1, 0xFF) for b in range(0xA1, 0xFF)]
    return out


def ours(data: bytes, charset: str) -> str | None:
    try:
        return decode_text(data, charset)
    except ValueDecodeError:
        return None


def verify(cursor: object, charset: str) -> str:
    run = cursor.execute  # type: ignore[attr-defined]
    run(
        f"SELECT b, HEX(CONVERT(CAST(b AS CHAR CHARACTER SET {charset}) USING utf8mb4)) "
        "FROM binlake_cs.seq"
    )
    we_reject, we_accept, differ = [], [], []
    for raw, hexed in cursor.fetchall():  # type: ignore[attr-defined]
        if len(raw) % UNIT.get(charset, 1):
            continue
        text = bytes.fromhex(hexed).decode("utf-8", "surrogatepass")
        server = None if ("?" in text or "\ufffd" in text) else text
        mine = ours(bytes(raw), charset)
        if server == mine:
            continue
        if mine is None:
            we_reject.append(bytes(raw).hex())
        elif server is None:
            we_accept.append(bytes(raw).hex())
        else:
            differ.append(bytes(raw).hex())
    return (
        f"{charset:10} differ={len(differ)} {differ[:4]} we_reject={len(we_reject)} "
        f"{we_reject[:4]} we_accept={len(we_accept)} {we_accept[:4]}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verify", action="store_true", help="compare codecs with the server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="binlake-cs-") as tmp:
        sandbox = MariaDBSandbox(Path(tmp) / "db", log_bin=False)
        with sandbox, sandbox.connect() as conn, conn.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            version = str(cursor.fetchone()[0])  # type: ignore[index]
            cursor.execute(
                "SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS"
                " WHERE ID IS NOT NULL ORDER BY ID"
            )
            rows = [(int(i), str(c), str(n)) for i, c, n in cursor.fetchall()]
            rewrite(rows, version)
            print(f"wrote {len(rows)} collations from MariaDB {version} into {CHARSETS_PY}")
            if args.verify:
                cursor.execute("CREATE DATABASE binlake_cs")
                cursor.execute("CREATE TABLE binlake_cs.seq (b VARBINARY(4))")
                seqs = sequences()
                for start in range(0, len(seqs), BATCH):
                    chunk = seqs[start : start + BATCH]
                    cursor.executemany("INSERT INTO binlake_cs.seq VALUES (%s)", chunk)
                for charset, codec in sorted(CHARSET_CODECS.items()):
                    if codec is not None and charset not in ("binary",):
                        print(verify(cursor, charset))
    return 0


if __name__ == "__main__":
    sys.exit(main())
