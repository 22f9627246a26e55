"""Readers: a file in, documents out (text, title, and where each passage came from).

Each module in this package is one reader: it declares the ``SUFFIXES`` it reads and a
``read(path, data, options) -> list[ReadDocument]`` (and the optional ``PACKAGE`` it
needs), and is found by its suffixes, so a new file type is one new module. Files are read in
a worker process under ``ReadOptions``' limits (``worker.py``). Readers import their optional packages when they first
read (``base.require``), so listing them costs nothing.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

from graphrag.errors import UnreadableFileError

from .base import Mark, ReadDocument, ReadLimits, ReadOptions, require
from .worker import WORKER

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["Mark", "ReadDocument", "ReadOptions", "read_data", "read_file", "reader_for", "known_suffixes"]

PLAIN_TEXT = "text"


@lru_cache(maxsize=None)
def _registry() -> dict[str, ModuleType]:
    readers: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in ("base", "worker"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for suffix in getattr(module, "SUFFIXES", ()):
            readers[suffix] = module
    return readers


def known_suffixes() -> list[str]:
    return sorted(_registry())


def reader_for(path: str) -> Optional[ModuleType]:
    """The reader module for ``path``'s suffix (case-insensitive), or None."""
    return _registry().get(os.path.splitext(path)[1].lower())


def read_file(path: str, options: ReadOptions = ReadOptions(), as_text: bool = False) -> list[ReadDocument]:
    """The documents in ``path``. ``as_text`` reads a file of an unknown type as plain text
    (one the user named or included on purpose). Raises ``UnreadableFileError`` with the
    reason, or ``MissingExtraError`` when the reader's package is not installed."""
    reader = _reader(path, as_text)
    _check_size(os.path.getsize(path), options)  # before reading a stray 200 MB file
    with open(path, "rb") as f:
        data = f.read()
    return _documents(reader, path, data, options)


def read_data(name: str, data: bytes, options: ReadOptions = ReadOptions()) -> list[ReadDocument]:
    """The documents in ``data``, read as a file called ``name`` (an upload; its source is
    ``name``). A name with no reader's suffix is read as text."""
    reader = _reader(name, as_text=True)
    _check_size(len(data), options)
    return _documents(reader, name, data, options)


def _reader(name: str, as_text: bool) -> ModuleType:
    reader = reader_for(name) or (_registry()[".txt"] if as_text else None)
    if reader is None:
        raise UnreadableFileError(f"no reader for {os.path.splitext(name)[1] or 'files without a suffix'} "
                                  f"(readable: {' '.join(known_suffixes())})")
    return reader


def _check_size(size: int, options: ReadOptions) -> None:
    if size == 0:
        raise UnreadableFileError("empty file")
    if size > options.max_file_bytes:
        raise UnreadableFileError(f"{size / 2**20:.1f} MiB, over the {options.max_file_bytes / 2**20:.0f} MiB "
                                  "size limit")


def _documents(reader: ModuleType, name: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    """The reader's documents, read in the worker process (``worker.py``) under the limits."""
    if getattr(reader, "PACKAGE", None):  # a missing package is said here, before any process starts
        require(reader.PACKAGE, reader.SUFFIXES[0])
    limits = ReadLimits(options)
    documents = [d for d in WORKER.read(reader, name, data, options) if d.text.strip()]
    if not documents:
        raise UnreadableFileError("no text in it")
    limits.check(chars=sum(len(d.text) for d in documents))  # the file's whole text, read by any reader
    return documents
