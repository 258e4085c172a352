"""The errors of data/: a setting that cannot work, and a build stopped by a signal."""

import signal


class DataError(Exception):
    """A data setting that cannot work; the message names the setting."""


class BuildStopped(Exception):
    """SIGINT (Ctrl-C) or SIGTERM came while the token cache was prepared; what the build had written is removed."""

    def __init__(self, received: signal.Signals):
        super().__init__(
            f"stopped by {received.name} while the token cache was built; nothing half-built was kept, "
            "the next run builds it again"
        )
        self.exit_status = 128 + received  # the shell's convention for a process ended by a signal
