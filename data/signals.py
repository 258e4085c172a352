"""SIGINT and SIGTERM during a token-cache build: raised as BuildStopped, so that the build's cleanup runs. Python's
default SIGTERM ends the process on the spot, leaving the staging directory behind; its default SIGINT raises
KeyboardInterrupt, which ends in a traceback."""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from data.errors import BuildStopped

# Only where one of these is the handler in place: a signal ignored (nohup, a background job) stays ignored, and a
# handler of the caller's own (trainer/stopping.py's StopSignals, installed around the training loop) stays its own.
DEFAULTS = (signal.SIG_DFL, signal.default_int_handler)


@contextmanager
def signals_raise() -> Iterator[None]:
    """While active, the first SIGINT or SIGTERM raises BuildStopped; any further one is ignored while the cleanup
    runs (it takes milliseconds). The handlers in place before come back on leaving. Only the main thread may handle
    signals: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []

    def handle(number: int, frame) -> None:
        if not received:
            received.append(number)
            raise BuildStopped(signal.Signals(number))

    previous = {
        number: signal.signal(number, handle)
        for number in (signal.SIGINT, signal.SIGTERM)
        if signal.getsignal(number) in DEFAULTS
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
