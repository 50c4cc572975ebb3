"""A receiver stand-in for crash tests: writes a source's transactions through RelayLogWriter.

Run as a subprocess (with ``tests`` on PYTHONPATH) and usually killed by a crash point set in
``BINLAKE_CRASH_POINT``. It prints, flushed, one line per durable fact, which the test trusts as
"the writer promised this":

    synced FILE OFFSET SEQ     sync() returned (FILE, OFFSET); transactions 1..SEQ are inside
    purge UP_TO                a purge of the files before UP_TO is about to start
    done                       everything written and closed cleanly

With ``--resume`` it restarts the way a receiver does: open (which runs recovery), find the last
complete transaction in the relay log itself (WL#4621: never from a separate file), and continue
the stream after it. ``--fsize-limit`` sets RLIMIT_FSIZE (writes past it fail with EFBIG).
A ``BinlakeError`` ends it like the CLI: message on stderr, exit code its class declares.
"""

from __future__ import annotations

import argparse
import resource
import signal
import sys
from pathlib import Path

from binlake.errors import BinlakeError
from binlake.relay.writer import RelayLogWriter
from relay_testing import gtid_seqs, source_log, split_events

HEADER_EVENTS = 2  # the source's FORMAT_DESCRIPTION and Gtid_list


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--transactions", type=int, default=60)
    parser.add_argument("--statements", type=int, default=2)
    parser.add_argument("--sync-every", type=int, default=3)
    parser.add_argument("--purge-every", type=int, default=20)
    parser.add_argument("--max-file-size", type=int, default=1500)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--fsize-limit", type=int, default=0)
    return parser.parse_args(argv)


def say(line: str) -> None:
    print(line, flush=True)


def write(args: argparse.Namespace) -> None:
    events = split_events(source_log(args.transactions, args.statements))
    tx_events = args.statements + 2  # GTID, statements, XID
    header = events[:HEADER_EVENTS]
    writer = RelayLogWriter.open(args.folder, max_file_size=args.max_file_size)
    done = gtid_seqs(args.folder) if args.resume else []
    start = done[-1] if done else 0
    for event in header:  # a replication stream starts with the source's FDE
        writer.append(event)
    for seq in range(start + 1, args.transactions + 1):
        first = HEADER_EVENTS + (seq - 1) * tx_events
        for event in events[first : first + tx_events]:
            writer.append(event)
        if seq % args.sync_every == 0 or seq == args.transactions:
            position = writer.sync()
            say(f"synced {position.file} {position.offset} {seq}")
        if args.purge_every and seq % args.purge_every == 0 and len(writer.files) > 2:
            up_to = writer.files[-2]
            say(f"purge {up_to}")
            writer.purge(up_to, keep_from=up_to)
    writer.close()
    say("done")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.fsize_limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG, not a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (args.fsize_limit, args.fsize_limit))
    try:
        write(args)
    except BinlakeError as error:
        print(f"error: {error}", file=sys.stderr)
        print(f"hint: {error.hint}", file=sys.stderr)
        return type(error).exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
