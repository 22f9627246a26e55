"""Markdown: the text as written (headings kept in it), each passage marked with the
heading trail above it; the title is the first level-1 heading."""
from __future__ import annotations

import re

from .base import ReadDocument, ReadOptions, TextBuilder, decode_text
from .text import title_from_path

SUFFIXES = (".md", ".markdown")

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def read(path: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    builder = TextBuilder(options)
    trail: list[tuple[int, str]] = []  # (level, heading) from the top down
    title = ""
    block: list[str] = []
    in_fence = False

    def flush() -> None:
        builder.add("\n".join(block), heading=" > ".join(h for _, h in trail) or None)
        block.clear()

    for line in decode_text(data).splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _ATX.match(line)
        if heading:
            flush()
            level, text = len(heading.group(1)), heading.group(2).strip()
            trail = [(lvl, h) for lvl, h in trail if lvl < level] + [(level, text)]
            title = title or (text if level == 1 else "")
        block.append(line)
    flush()
    return [ReadDocument(builder.text(), path, title or title_from_path(path), builder.marks)]
