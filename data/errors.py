"""The one error type of data/."""


class DataError(Exception):
    """A data setting that cannot work; the message names the setting."""
