"""`binlake receive`: stream the source's binlog into the relay log until stopped or caught up.

SIGINT and SIGTERM ask for a clean stop (the relay log is synced and closed, the lock released,
exit 0); a second SIGINT while stopping is left to the default handler (KeyboardInterrupt, exit
130). Errors are typed, printed as ``error:``/``hint:`` lines by cli/main.py, with their exit
codes; nothing printed ever contains the password.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from binlake.cli.signals import stop_on_signals
from binlake.config import load_config
from binlake.source.receiver import Receiver


def register(commands: Any) -> None:
    receive = commands.add_parser(
        "receive",
        help="stream the source's binlog into the crash-safe relay log in [state] dir; runs "
        "until SIGINT/SIGTERM, or with --until-caught-up until it holds the source's binlog",
    )
    receive.add_argument(
        "--config", required=True, type=Path, metavar="F", help="binlake's TOML config file"
    )
    receive.add_argument(
        "--until-caught-up",
        action="store_true",
        help="stop (exit 0) once the relay log holds everything the source's binlog held at "
        "start; give up after [receiver] catch_up_give_up_s without the source",
    )
    receive.add_argument(
        "--accept-new-source",
        action="store_true",
        help="record the server behind [source] as the source even though it is not the one "
        "this state folder replicated from (failover to a server with the same history)",
    )
    receive.set_defaults(handler=run_receive)


def run_receive(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    receiver = Receiver(
        config, until_caught_up=args.until_caught_up, accept_new_source=args.accept_new_source
    )
    with stop_on_signals(receiver):
        receiver.run()
    return 0
