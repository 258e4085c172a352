"""Command-line entry points: every mistake a user can make ends in one line on stderr and exit status 1."""

import os
import sys
from typing import Callable

from hydra.errors import HydraException, OverrideParseException
from omegaconf.errors import OmegaConfBaseException


def run_with_one_line_errors(main: Callable[[], object]) -> None:
    """Run a @hydra.main function; Hydra's own errors (an unknown key, a wrong type, a missing option) become
    one line too. HYDRA_FULL_ERROR=1, set by the user, shows Hydra's full report with its traceback instead."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        main()
        return
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra then raises its errors here instead of printing several lines
    try:
        main()
    except (HydraException, OmegaConfBaseException) as error:
        sys.exit(f"error: {one_line(error)}")
    finally:
        del os.environ["HYDRA_FULL_ERROR"]


def one_line(error: Exception) -> str:
    if isinstance(error, OverrideParseException):
        return (f"{error.override}: Hydra cannot parse this override; quote a value that has spaces or other "
                f"characters, e.g. 'prompt=\"ROMEO: é\"'")  # fmt: skip
    cause = error.__cause__
    if isinstance(cause, OmegaConfBaseException) and cause.full_key:
        # "model.d_kk: Key 'd_kk' not in 'ModelConfig'", rather than Hydra's four lines about it
        return f"{cause.full_key}: {str(cause.msg).splitlines()[0]}"
    lines = [line.strip() for line in str(error).split("Config search path")[0].splitlines() if line.strip()]
    return " ".join(lines)
