"""Reading what weak models write instead of the asked-for format.

Small local models answer an extraction prompt with a JSON list of entities, a markdown
table, or a reasoning block before the records. When such an answer carries the same
facts as the tuple records, it is read here rather than thrown away; ``strip_reasoning``
also serves the report and global-map parsers.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional

from graphrag.schema import EntityRecord, RelationRecord

# Reasoning models put their thoughts in these tags before the answer.
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_OPEN_REASONING = re.compile(r"<(?:think|thinking|reasoning)>", re.I)
_CLOSE_REASONING = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
# What every tag above begins with: one scan finds an answer with none (most answers).
_REASONING_TAG = re.compile(r"<[/tr]", re.I)
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?$")

_NAME_KEYS = ("name", "entity_name", "entity", "title")
_TYPE_KEYS = ("type", "entity_type", "category", "kind")
_DESCRIPTION_KEYS = ("description", "entity_description", "relationship_description", "summary", "details")
_SOURCE_KEYS = ("source", "source_entity", "from", "head", "subject")
_TARGET_KEYS = ("target", "target_entity", "to", "tail", "object")
_STRENGTH_KEYS = ("strength", "relationship_strength", "weight", "score")


def strip_reasoning(text: str) -> str:
    """``text`` without ``<think>...</think>`` blocks. An unclosed opening tag means the model
    spent the whole answer reasoning (nothing is left); a closing tag with no opening one (some
    chat templates open the block in the prompt) leaves what follows it."""
    if not _REASONING_TAG.search(text or ""):
        return text or ""
    text = _REASONING.sub("", text)
    opened = _OPEN_REASONING.search(text)
    if opened:
        text = text[: opened.start()]
    closing = list(_CLOSE_REASONING.finditer(text))
    if closing:
        text = text[closing[-1].end():]
    return text


def _field(item: dict, keys: tuple[str, ...]) -> str:
    lowered = {str(k).strip().lower().replace(" ", "_"): v for k, v in item.items()}
    for key in keys:
        value = lowered.get(key)
        if value not in (None, "") and not isinstance(value, (dict, list)):
            return str(value)
    return ""


def _records_from_items(items: list[Any], entities: list[dict], relations: list[dict]) -> None:
    """Entity and relation dicts (raw field values) from JSON objects, whatever their keys."""
    for item in items:
        if not isinstance(item, dict):
            continue
        source, target = _field(item, _SOURCE_KEYS), _field(item, _TARGET_KEYS)
        if source and target:
            relations.append({"source": source, "target": target,
                              "description": _field(item, _DESCRIPTION_KEYS),
                              "strength": _field(item, _STRENGTH_KEYS) or None})
            continue
        name = _field(item, _NAME_KEYS)
        if name:
            entities.append({"name": name, "type": _field(item, _TYPE_KEYS),
                             "description": _field(item, _DESCRIPTION_KEYS)})


def _json_values(text: str) -> list[Any]:
    """Every top-level JSON list or object in ``text`` that parses, in order."""
    decoder = json.JSONDecoder(strict=False)
    values: list[Any] = []
    pos = 0
    while True:
        starts = [i for i in (text.find("[", pos), text.find("{", pos)) if i != -1]
        if not starts:
            return values
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        values.append(value)
        pos = end


def _from_json(text: str, entities: list[dict], relations: list[dict]) -> None:
    for value in _json_values(text):
        if isinstance(value, list):
            _records_from_items(value, entities, relations)
        elif isinstance(value, dict):
            lists = [v for v in value.values() if isinstance(v, list)]
            if lists:  # {"entities": [...], "relationships": [...]}
                for items in lists:
                    _records_from_items(items, entities, relations)
            else:
                _records_from_items([value], entities, relations)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _from_tables(text: str, entities: list[dict], relations: list[dict]) -> None:
    """Rows of markdown tables whose header names the fields (``| Entity | Type | ... |``)."""
    lines = [line.strip() for line in text.splitlines()]
    i = 0
    while i + 1 < len(lines):
        if not (lines[i].count("|") >= 2 and _TABLE_RULE.match(lines[i + 1])):
            i += 1
            continue
        header = [h.lower().replace(" ", "_").strip("*") for h in _cells(lines[i])]
        rows: list[dict] = []
        i += 2
        while i < len(lines) and lines[i].count("|") >= 2:
            cells = _cells(lines[i])
            rows.append(dict(zip(header, cells)))
            i += 1
        _records_from_items(rows, entities, relations)


def read_other_formats(text: str) -> tuple[list[dict], list[dict]]:
    """Entities (``name``, ``type``, ``description``) and relations (``source``, ``target``,
    ``description``, ``strength``) written as JSON or as markdown tables, raw as written;
    ([], []) when the answer holds neither."""
    text = _FENCE.sub("\n", text)
    entities: list[dict] = []
    relations: list[dict] = []
    if "[" in text or "{" in text:
        _from_json(text, entities, relations)
    if not entities and not relations and "|" in text:
        _from_tables(text, entities, relations)
    return entities, relations


def is_only_completion(text: str, completion_delimiter: str, record_delimiter: str) -> bool:
    """True for a well-formed "nothing here" answer: the completion marker and nothing else
    (fences and record delimiters aside)."""
    if completion_delimiter.lower() not in text.lower():
        return False
    rest = re.sub(re.escape(completion_delimiter), "", _FENCE.sub("", text), flags=re.I)
    if record_delimiter:
        rest = rest.replace(record_delimiter, "")
    return not rest.strip()


def as_records(entities: list[dict], relations: list[dict], *, entity: Callable[[list[str]], Optional[EntityRecord]],
               relation: Callable[[list[str]], Optional[RelationRecord]]
               ) -> tuple[list[EntityRecord], list[RelationRecord], int]:
    """Raw records through the tuple parser's own field readers (``entity``/``relation``
    take the field list of one record), so every format names and cleans alike."""
    out_e: list[EntityRecord] = []
    out_r: list[RelationRecord] = []
    malformed = 0
    for e in entities:
        record: Optional[Any] = entity([e["name"], e["type"], e["description"]])
        malformed += record is None
        if record is not None:
            out_e.append(record)
    for r in relations:
        fields = [r["source"], r["target"], r["description"]] + ([r["strength"]] if r["strength"] else [])
        record = relation(fields)
        malformed += record is None
        if record is not None:
            out_r.append(record)
    return out_e, out_r, malformed
