"""HTML: the main text, without navigation, scripts, styles and page furniture; each
passage marked with the heading trail above it. When the page has a <main> or <article>,
only that is read."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Optional

from .base import ReadDocument, ReadOptions, TextBuilder, decode_text
from .text import title_from_path

SUFFIXES = (".html", ".htm", ".xhtml")

# Never text a reader wants.
_SKIPPED = {"script", "style", "noscript", "template", "svg", "nav", "header", "footer", "aside", "form",
            "iframe", "button", "select", "head"}
_MAIN = {"main", "article"}
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
# Elements that end a block of text (a paragraph boundary in the output).
_BLOCKS = {"p", "div", "section", "li", "ul", "ol", "table", "tr", "br", "pre", "blockquote", "dd", "dt", "dl",
           "figcaption", "hr", "td", "th"} | set(_HEADINGS) | _MAIN
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
_META_CHARSET = re.compile(rb"<meta[^>]+charset=[\"']?([A-Za-z0-9_-]+)", re.IGNORECASE)


class _MainText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skipping = 0  # depth inside skipped elements
        self.main_depth = 0
        self.title = ""
        self.in_title = False
        self.heading_level: Optional[int] = None
        self.heading_text: list[str] = []
        self.trail: list[tuple[int, str]] = []
        self.current: list[str] = []
        # (text, heading trail, inside <main>/<article>)
        self.blocks: list[tuple[str, Optional[str], bool]] = []

    def _end_block(self) -> None:
        text = " ".join("".join(self.current).split())
        if text:
            self.blocks.append((text, " > ".join(h for _, h in self.trail) or None, self.main_depth > 0))
        self.current.clear()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in _VOID:
            if tag in _BLOCKS and not self.skipping:
                self._end_block()
            return
        if self.skipping or tag in _SKIPPED or dict(attrs).get("role") in ("navigation", "banner", "contentinfo"):
            self.skipping += 1
            return
        if tag in _BLOCKS:
            self._end_block()
        if tag in _MAIN:
            self.main_depth += 1
        if tag in _HEADINGS:
            self.heading_level, self.heading_text = _HEADINGS[tag], []

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in _VOID:
            return
        if self.skipping:
            self.skipping -= 1
            return
        if tag in _HEADINGS and self.heading_level is not None:
            text = " ".join("".join(self.heading_text).split())
            if text:
                level = self.heading_level
                self.trail = [(lvl, h) for lvl, h in self.trail if lvl < level] + [(level, text)]
            self.heading_level = None
        if tag in _BLOCKS:
            self._end_block()
        if tag in _MAIN:
            self.main_depth = max(0, self.main_depth - 1)

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        if self.skipping:
            return
        if self.heading_level is not None:
            self.heading_text.append(data)
        self.current.append(data)


def _decode(data: bytes) -> str:
    declared = _META_CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"))
        except (LookupError, UnicodeDecodeError):
            pass
    return decode_text(data)


def read(path: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    parser = _MainText()
    parser.feed(_decode(data))
    parser.close()
    parser._end_block()
    blocks = parser.blocks
    if any(in_main for _, _, in_main in blocks):
        blocks = [b for b in blocks if b[2]]
    builder = TextBuilder(options)
    for text, heading, _ in blocks:
        builder.add(text, heading=heading)
    title = " ".join(parser.title.split()) or next((t for t, h, _ in blocks if h == t), "")
    return [ReadDocument(builder.text(), path, title or title_from_path(path), builder.marks)]
