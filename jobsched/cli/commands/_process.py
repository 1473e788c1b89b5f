"""What the long-running commands (``dev``, ``worker``) share: stop signals and bounded numbers."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable


def on_stop_signals(stop: Callable[[], None]) -> Callable[[], None]:
    """SIGINT and SIGTERM call ``stop``; returns a function restoring the previous handlers (a no-op
    off the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: stop())

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def bounded(kind: Callable[[str], float], low: float, high: float, unit: str = "") -> Callable[[str], float]:
    """An argparse type: ``kind(text)`` within ``low..high``, else a usage error naming the range."""
    noun = "a whole number" if kind is int else "a number"
    suffix = f" {unit}" if unit else ""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text} is not {noun}{suffix and ' of' + suffix}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} must be {low:g}..{high:g}{suffix}")
        return value

    parse.__name__ = kind.__name__
    return parse
