"""Clean stops on SIGINT/SIGTERM for the long-running commands."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Protocol


class Stoppable(Protocol):
    def request_stop(self) -> None: ...


@contextmanager
def stop_on_signals(runner: Stoppable) -> Iterator[None]:
    """SIGINT/SIGTERM -> ``runner.request_stop()``; a second SIGINT interrupts for real."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        runner.request_stop()
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
