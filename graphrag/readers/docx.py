"""Word .docx (with python-docx): paragraphs and tables in order, each passage marked with
the heading trail above it; the title is the document's own, or its first Title paragraph."""
from __future__ import annotations

import io
from typing import TYPE_CHECKING, Optional

from graphrag.errors import UnreadableFileError

from .base import ReadDocument, ReadOptions, TextBuilder, check_package, require
from .text import title_from_path

if TYPE_CHECKING:
    from docx.text.paragraph import Paragraph

SUFFIXES = (".docx",)
PACKAGE = "docx"


def _heading_level(paragraph: Paragraph) -> Optional[int]:
    """1-9 for "Heading N" styles, 0 for "Title", None for body text."""
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    if name == "Title":
        return 0
    if name.startswith("Heading "):
        level = name.removeprefix("Heading ")
        return int(level) if level.isdigit() else None
    return None


def read(path: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    docx = require(PACKAGE, SUFFIXES[0])
    check_package(data, options)
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(document.iter_inner_content())
        title = (document.core_properties.title or "").strip()
    except MemoryError:  # the reading process's limit (worker.py), not a damaged file
        raise
    except Exception as exc:  # a damaged zip or package raises several kinds
        raise UnreadableFileError(f"corrupt .docx ({type(exc).__name__}: {exc})") from exc
    builder = TextBuilder(options)
    trail: list[tuple[int, str]] = []
    for block in blocks:
        if hasattr(block, "rows"):  # a table: one line per row
            text = "\n".join(" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows)
        else:
            text = block.text
            level = _heading_level(block)
            if level == 0:  # the title names the whole document, not a section of it
                title = title or text.strip()
            elif level is not None and text.strip():
                title = title or (text.strip() if level == 1 else "")
                trail = [(lvl, h) for lvl, h in trail if lvl < level] + [(level, text.strip())]
        builder.add(text, heading=" > ".join(h for _, h in trail) or None)
    return [ReadDocument(builder.text(), path, title or title_from_path(path), builder.marks)]
