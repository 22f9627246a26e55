"""Reading a community report out of a model's answer: the JSON object, however it came.

Models wrap the object in fences or prose, leave trailing commas, write Python-style dicts,
rate "8/10" and name findings' keys their own way; all of that is read, and an answer with
no titled report is None.
"""
from __future__ import annotations

import ast
import json
import re
from typing import TYPE_CHECKING, Optional

from graphrag.schema import Finding, ReportJSON

from .answer_formats import strip_reasoning

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?")
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)?")
_MAX_OBJECT_TRIES = 50
_JSON = json.JSONDecoder(strict=False)
_SCALE = re.compile(r"^\s*(?:/|out\s+of|of)\s*(\d+(?:\.\d+)?)", re.I)


def _outermost_object(text: str, start: int) -> str:
    """The balanced ``{...}`` opening at ``start`` (string-aware); up to the last ``}`` if it never balances."""
    depth, in_str, escape, quote = 0, False, False, ""
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                in_str = False
        elif ch == '"':
            in_str, quote = True, ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    end = text.rfind("}")
    return text[start:end + 1] if end > start else text[start:] + "}"


def _loads(candidate: str) -> object:
    for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
        try:
            return json.loads(attempt, strict=False)
        except ValueError:
            pass
    try:  # Python-style dicts: single quotes, True/False/None
        return ast.literal_eval(_TRAILING_COMMA.sub(r"\1", candidate))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _find_object(text: str) -> Optional[dict]:
    """The first object in ``text`` that loads, preferring one with a title (prose may hold braces)."""
    first: Optional[dict] = None
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _MAX_OBJECT_TRIES:
        tries += 1
        try:  # well-formed JSON, the usual case, is parsed in C without scanning for braces
            data, end = _JSON.raw_decode(text, start)
        except ValueError:
            candidate = _outermost_object(text, start)
            data, end = _loads(candidate), start + len(candidate)
        if isinstance(data, dict):
            if data.get("title") or any(isinstance(v, dict) and v.get("title") for v in data.values()):
                return data
            first = first if first is not None else data
            start = text.find("{", end)
        else:
            start = text.find("{", start + 1)
    return first


def parse_rating(value: JSONValue) -> float:
    """A report's rating as a number from 0 to 10, whether the model wrote ``7.5``, ``"7,5"``
    or ``"8/10"``; 0 when none can be read."""
    if isinstance(value, bool):
        value = float(value)
    if isinstance(value, (int, float)):
        rating = float(value)
    else:
        text = str(value or "")
        m = _NUMBER.search(text)
        if not m:
            return 0.0
        rating = float(m.group().replace(",", "."))
        scale = _SCALE.match(text[m.end():])
        if scale and float(scale.group(1)) > 0:
            rating = rating * 10.0 / float(scale.group(1))
    if rating != rating:  # NaN
        return 0.0
    return round(min(10.0, max(0.0, rating)), 2)


def stored_rating(record: dict) -> float:
    """The rating of a stored report record (reports from other tools too, whose rating
    may still be text)."""
    report = record.get("report_json")
    if not isinstance(report, dict):
        return 0.0
    rating = report.get("rating")
    # Ours were parsed when written: a global query reads every report's, so skip the parse.
    if type(rating) is float and 0.0 <= rating <= 10.0:
        return rating
    return parse_rating(rating)


def _first(d: dict, keys: tuple[str, ...]) -> str:
    for k in keys:
        v = d.get(k)
        if v not in (None, ""):
            return v.strip() if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return ""


def _coerce_findings(value: JSONValue) -> list[Finding]:
    if value is None:
        return []
    if isinstance(value, (str, dict)):
        value = [value]
    findings: list[Finding] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict):
            summary = _first(item, ("summary", "insight", "title", "finding"))
            explanation = _first(item, ("explanation", "description", "details", "detail", "text"))
        else:
            summary, explanation = str(item).strip(), ""
        if summary or explanation:
            findings.append({"summary": summary, "explanation": explanation})
    return findings


def parse_report_json(text: str) -> Optional[ReportJSON]:
    """A normalised report from an LLM answer, or None when it holds no report with a title.

    Copes with reasoning blocks, code fences, prose around the object, trailing commas, ratings such as
    ``"7.5"`` or ``"8/10"``, and findings given as strings or with ``insight`` keys.
    """
    if not isinstance(text, str) or "{" not in text:
        return None
    data = _find_object(_FENCE.sub("", strip_reasoning(text)))
    if data is None:
        return None
    if not data.get("title"):
        # {"report": {...}} and similar one-key wrappers
        inner = [v for v in data.values() if isinstance(v, dict) and v.get("title")]
        if len(inner) == 1:
            data = inner[0]
    title = data.get("title")
    if not isinstance(title, (str, int, float)) or not str(title).strip():
        return None
    return {
        "title": str(title).strip(),
        "summary": str(data.get("summary") or "").strip(),
        "rating": parse_rating(data.get("rating")),
        "rating_explanation": str(data.get("rating_explanation") or "").strip(),
        "findings": _coerce_findings(data.get("findings")),
    }
