"""JSON and JSON Lines records: one document per record, its text and title taken from the
fields ``ReadOptions`` names. A record's source is ``path#<id>`` (its id field when it has
one, else its position), so editing one record updates only that document."""
from __future__ import annotations

import json
from typing import Any, Iterator

from graphrag.errors import UnreadableFileError

from .base import ReadDocument, ReadOptions, TextBuilder, decode_text

SUFFIXES = (".jsonl", ".ndjson", ".json")


def _records(path: str, text: str) -> Iterator[tuple[int, Any]]:
    if path.lower().endswith(".json"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UnreadableFileError(f"invalid JSON ({exc})") from exc
        yield from enumerate(data if isinstance(data, list) else [data], start=1)
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except ValueError as exc:
                raise UnreadableFileError(f"invalid JSON on line {number} ({exc})") from exc


def read(path: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    documents: list[ReadDocument] = []
    for position, record in _records(path, decode_text(data)):
        if not isinstance(record, dict) or not isinstance(record.get(options.text_field), str):
            continue
        builder = TextBuilder(options)
        builder.add(record[options.text_field])
        key = record.get(options.id_field)
        title = record.get(options.title_field)
        documents.append(ReadDocument(builder.text(), f"{path}#{key if key is not None else position}",
                                      str(title) if title else f"record {key if key is not None else position}"))
    if not documents:
        raise UnreadableFileError(f"no record with a {options.text_field!r} text field")
    return documents
