"""Whether an events file reads to its end. A crash can leave one empty, cut short mid-record, or garbled.

TensorBoard's own reader stops silently at the first bad record, so nobody learns that a run lost its last events;
this reads the records again, with their checksums, to say so.
"""

from enum import Enum
from pathlib import Path

from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New


class Damage(Enum):
    truncated = "events file cut short mid-record; its readable events are used"
    unreadable = "unreadable events file (empty, or not TensorBoard's); skipped"


def damage(path: Path) -> Damage | None:
    """None where every record reads; otherwise whether any record did before the first bad one."""
    reader = PyRecordReader_New(str(path))
    records = 0
    try:
        while True:
            reader.GetNext()
            records += 1
    except errors.OutOfRangeError:  # the end of the file, at a record boundary
        return None if records else Damage.unreadable
    except errors.DataLossError:  # a record cut short, or bytes that fail their checksum
        return Damage.truncated if records else Damage.unreadable
    finally:
        reader.file_handle.close()
