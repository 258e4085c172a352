"""What the first bytes of a file that is not UTF-8 text show it to be: a binary format, UTF-16 text, or (neither)
text in another 8-bit encoding, which iconv converts."""

from typing import Optional

MAGIC = {  # how common binary formats begin
    b"\x89PNG\r\n\x1a\n": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF87a": "a GIF image",
    b"GIF89a": "a GIF image",
    b"%PDF-": "a PDF document",
    b"PK\x03\x04": "a zip archive (as are .docx, .xlsx, .jar and torch's .pt files)",
    b"\x1f\x8b": "gzip-compressed",
    b"BZh": "bzip2-compressed",
    b"\xfd7zXZ\x00": "xz-compressed",
    b"\x28\xb5\x2f\xfd": "zstd-compressed",
    b"7z\xbc\xaf\x27\x1c": "a 7-Zip archive",
    b"\x7fELF": "an executable (ELF)",
    b"\x93NUMPY": "a NumPy array (.npy)",
    b"SQLite format 3\x00": "an SQLite database",
}
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# Text in any 8-bit encoding has next to no control characters; random bytes have 11% (28 of 256 values).
CONTROL = bytes(set(range(32)) - set(b"\t\n\v\f\r") | {0x7F})
MOST_CONTROL_IN_TEXT = 0.05


def binary_kind(head: bytes) -> Optional[str]:
    """What `head`, a file's first bytes, shows the file to be when it is not text ("a PNG image"); None when it
    may be text in some encoding."""
    for magic, kind in MAGIC.items():
        if head.startswith(magic):
            return kind
    if head.startswith(UTF16_BOMS):
        return None
    if (nul := head.find(b"\x00")) >= 0:
        return f"binary data (a NUL byte at offset {nul})"
    control = len(head) - len(head.translate(None, CONTROL))
    if control > MOST_CONTROL_IN_TEXT * len(head):
        return f"binary data ({control} of its first {len(head)} bytes are control characters)"
    return None


def is_utf16(head: bytes) -> bool:
    return head.startswith(UTF16_BOMS)
