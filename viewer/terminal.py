"""stdout for the commands that read runs (attend.py, sample.py). A reader that stops early (`| head`) ends the
command quietly, as it ends any Unix tool (status 141); stdout that cannot be written (a full disk) is said in one
line at the end. Either way the command goes on with what it writes to files (attend.py's PNGs)."""

import os
import signal
import sys

from trainer.config import ConfigError


class Stdout:
    def __init__(self, what: str):
        self.what = what  # "the samples", "the trace": what the one line says cannot be written
        self.failed: OSError | None = None

    def write(self, text: str) -> None:
        """`text` and a line break, on stdout now (a full disk shows here, not when Python flushes at exit)."""
        if self.failed:
            return
        try:
            print(text)
            sys.stdout.flush()
        except OSError as error:  # BrokenPipeError: the reader stopped; ENOSPC: the disk is full
            self.failed = error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit: nowhere

    def finish(self) -> None:
        """Exit as the failure says: 141 for a reader that stopped early, one line for stdout that failed."""
        if isinstance(self.failed, BrokenPipeError):
            sys.exit(128 + signal.SIGPIPE)
        if self.failed:
            raise ConfigError(f"stdout: {self.what} cannot be written ({self.failed.strerror})")
