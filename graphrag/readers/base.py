"""What a reader hands the engine: a document's text, its title, and where each part of the
text came from (page numbers, headings), as offsets into that text."""
from __future__ import annotations

import importlib
import io
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from graphrag.errors import MissingExtraError, UnreadableFileError
from graphrag.schema import strip_control_chars

if TYPE_CHECKING:
    from types import ModuleType

# Blocks (paragraphs, pages, records) are joined by a blank line, which the chunker's
# separators also treat as the strongest boundary.
BLOCK_SEPARATOR = "\n\n"
# Detection scores ("chaos", 0 to 1) this close count as a tie.
_CLOSE_CHAOS = 0.1


@dataclass(frozen=True)
class Mark:
    """From ``offset`` on, the text is on ``page`` (1-based) and/or under ``heading`` (the
    heading trail, e.g. "Safety > Ladders")."""

    offset: int
    page: Optional[int] = None
    heading: Optional[str] = None


@dataclass
class ReadDocument:
    text: str
    source: str  # the file's path, or "path#record" for one record of a JSON file
    title: str
    marks: list[Mark] = field(default_factory=list)


@dataclass(frozen=True)
class ReadOptions:
    """How files are read. ``max_file_bytes`` keeps a stray 200 MB log out of the index;
    the JSON fields name what a record's title and text are (and its id, which keeps a
    record's identity when records are added or removed around it).

    The other limits stop a file that is small on disk but huge once read (a decompression
    bomb: pages sharing one giant compressed stream, a zip part that unpacks a thousandfold):
    past one, the file is refused with the limit it broke. ``max_pages`` and ``max_chars``
    (extracted text) are checked as the text grows, ``max_seconds`` between pages and blocks
    and, with ``max_memory_bytes``, by the process the file is read in (``worker.py``);
    a zip package (.docx) is refused before it is parsed when a part would unpack to more than
    ``max_file_bytes`` or more than ``MAX_INFLATE_RATIO`` times its packed size."""

    max_file_bytes: int = 100 * 1024 * 1024
    max_pages: int = 5_000
    max_chars: int = 20_000_000  # a shelf of books; far more than any one document
    max_seconds: float = 120.0
    max_memory_bytes: int = 2 << 30  # the reading process's address space
    text_field: str = "text"
    title_field: str = "title"
    id_field: str = "id"


class TextBuilder:
    """Joins blocks into one clean text, marking where each page or heading starts.

    Each block is cleaned here (control characters out, edges stripped) so the text needs
    no further change before it is stored and the offsets stay true.
    """

    def __init__(self, options: ReadOptions) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.marks: list[Mark] = []
        self.limits = ReadLimits(options)

    def add(self, block: str, page: Optional[int] = None, heading: Optional[str] = None) -> None:
        self.limits.check(self._length + len(block), page)
        block = strip_control_chars(block).strip()
        if not block:
            return
        if self._parts:
            self._parts.append(BLOCK_SEPARATOR)
            self._length += len(BLOCK_SEPARATOR)
        last = self.marks[-1] if self.marks else None
        if (page, heading) != (None, None) and (last is None or (last.page, last.heading) != (page, heading)):
            self.marks.append(Mark(self._length, page, heading))
        self._parts.append(block)
        self._length += len(block)

    def text(self) -> str:
        return "".join(self._parts)


class ReadLimits:
    """The limits of ``ReadOptions`` for reading one file, its clock started now."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.deadline = time.monotonic() + options.max_seconds

    def check(self, chars: int = 0, pages: Optional[int] = None) -> None:
        """Refuse the file when what was read so far breaks a limit."""
        limits = self.options
        if pages is not None and pages > limits.max_pages:
            raise UnreadableFileError(f"over the limit of {limits.max_pages} pages")
        if chars > limits.max_chars:
            raise UnreadableFileError(f"over the limit of {limits.max_chars} characters of text")
        if time.monotonic() > self.deadline:
            raise UnreadableFileError(f"reading took over the limit of {limits.max_seconds:g} s")


# A zip part that unpacks to more than this many times its packed size is a decompression bomb
# (ordinary XML packs 5-20 times; the ratio is the one Apache POI refuses at by default).
MAX_INFLATE_RATIO = 100
_RATIO_FROM_BYTES = 1 << 20  # tiny parts may pack very well without harm


def check_package(data: bytes, options: ReadOptions) -> None:
    """Refuse a zip package whose parts would unpack to too much, before anything unpacks
    (the sizes are the ones the zip declares; ``zipfile`` never unpacks a part past its own)."""
    import zipfile

    try:
        parts = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError):
        return  # no zip at all: the reader says the file is corrupt
    total = sum(p.file_size for p in parts)
    if total > options.max_file_bytes:
        raise UnreadableFileError(f"unpacks to {total / 2**20:.0f} MiB, over the "
                                  f"{options.max_file_bytes / 2**20:.0f} MiB size limit")
    for part in parts:
        if part.file_size > _RATIO_FROM_BYTES and part.file_size > MAX_INFLATE_RATIO * max(part.compress_size, 1):
            raise UnreadableFileError(f"{part.filename} unpacks to {part.file_size // max(part.compress_size, 1)} "
                                      f"times its packed size (over {MAX_INFLATE_RATIO}): a decompression bomb")


def require(module: str, suffix: str) -> ModuleType:
    """Import an optional dependency, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"reading {suffix} files needs the {module!r} package: "
                                "pip install 'filegraphrag[files]'") from None


def decode_text(data: bytes) -> str:
    """Bytes to text: UTF-8 (with or without a BOM) when it is, else the detected encoding.

    Data with NUL bytes and no UTF-16/32 byte order mark is binary, not text."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 (and UTF-32 LE) byte order marks
        return _detected(data)
    if b"\x00" in data[:8192]:
        raise UnreadableFileError("binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return _detected(data)


def _detected(data: bytes) -> str:
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        raise UnreadableFileError("not UTF-8 text; install 'filegraphrag[files]' to detect its encoding") from None
    matches = list(from_bytes(data))
    if not matches:
        raise UnreadableFileError("not text in any encoding that could be detected")
    # Detection is unsure on short texts, where several code pages look about as clean;
    # then the most common one for non-UTF-8 files, Windows-1252 (Latin-1's superset), wins.
    best = matches[0]
    western = next((m for m in matches if "cp1252" in m.could_be_from_charset), None)
    if western is not None and western.chaos <= best.chaos + _CLOSE_CHAOS:
        return data.decode("cp1252", errors="replace")
    return str(best)
