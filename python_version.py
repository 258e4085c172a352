"""The Python tinylm runs on: every entry point imports this module first (`import python_version` at its top), so
that an older Python is refused in one line before it imports anything written for 3.11. Python 3.8 to 3.10 read the
entry points and reach this line; 3.7 and older stop at the entry point's own syntax (its `:=`) before it.

Only the oldest syntax here: this file must run on the Pythons it refuses.
"""

import sys

OLDEST = (3, 11)  # pyproject.toml's requires-python
REFUSAL = (
    "error: Python {}.{}.{} ({}): tinylm needs Python {}.{} or newer; the README's Install notes say how to get it"
)


def refusal(version=sys.version_info, executable=sys.executable):
    """The one line that refuses `version`, or None where tinylm runs on it."""
    if tuple(version[:2]) >= OLDEST:
        return None
    return REFUSAL.format(version[0], version[1], version[2], executable or "python", *OLDEST)


if refusal() is not None:
    sys.exit(refusal())
