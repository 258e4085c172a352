"""The errors of data/: a setting that cannot work."""


class DataError(Exception):
    """A data setting that cannot work; the message names the setting."""
