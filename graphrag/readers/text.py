"""Plain text: one document, its encoding detected when it is not UTF-8."""
from __future__ import annotations

import os

from .base import ReadDocument, ReadOptions, TextBuilder, decode_text

SUFFIXES = (".txt", ".text", ".log", ".rst")


def title_from_path(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def read(path: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    builder = TextBuilder(options)
    builder.add(decode_text(data))
    return [ReadDocument(builder.text(), path, title_from_path(path))]
