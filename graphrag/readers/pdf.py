"""PDF (with pypdf): the text of each page, marked with its page number."""
from __future__ import annotations

import io
import logging

from graphrag.errors import UnreadableFileError

from .base import ReadDocument, ReadOptions, TextBuilder, require
from .text import title_from_path

SUFFIXES = (".pdf",)
PACKAGE = "pypdf"

logger = logging.getLogger(__name__)


def read(path: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    pypdf = require(PACKAGE, SUFFIXES[0])
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its per-object warnings on damaged files
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        # Many PDFs are encrypted with an empty user password: readable by anyone.
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFileError("encrypted PDF (a password is needed to read it)")
        builder = TextBuilder(options)
        builder.limits.check(pages=len(reader.pages))  # before reading any page
        for number, page in enumerate(reader.pages, start=1):
            builder.limits.check()  # each page may take long: the clock is checked before each
            builder.add(page.extract_text() or "", page=number)
        title = str((reader.metadata or {}).get("/Title") or "").strip()
    except UnreadableFileError:
        raise
    except MemoryError:  # the reading process's limit (worker.py), not a damaged file
        raise
    except Exception as exc:  # pypdf raises many kinds on damaged files
        raise UnreadableFileError(f"corrupt PDF ({type(exc).__name__}: {exc})") from exc
    text = builder.text()
    if not text:
        raise UnreadableFileError(f"no text layer in its {len(reader.pages)} page(s) (scanned or image-only PDF)")
    return [ReadDocument(text, path, title or title_from_path(path), builder.marks)]
