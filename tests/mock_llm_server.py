"""A local, deterministic OpenAI-compatible server for tests and offline benchmarks.

It speaks just enough of the API (chat completions, streamed with ``stream=true`` or not,
embeddings, models) for the real ``openai`` client, answers every prompt kind of this
project with plausible model-like output, and can inject faults (429/500, connection
resets, delays, empty answers) so the client's retry logic is exercised over real HTTP.

Test support, not part of the installed package: tests import it as ``mock_llm_server``
(pytest puts ``tests/`` on ``sys.path``); run it by path, e.g.
``python tests/mock_llm_server.py --port 8765 --latency 0.2``.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import logging
import math
import re
import socket
import struct
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

from graphrag import prompts
from graphrag.schema import edge_key

logger = logging.getLogger(__name__)

Responder = Callable[[dict], str]

TUPLE = prompts.TUPLE_DELIMITER
RECORD = prompts.RECORD_DELIMITER
COMPLETE = prompts.COMPLETION_DELIMITER
DEFAULT_ENTITY_TYPES = prompts.DEFAULT_ENTITY_TYPES

_STOP = {
    "The", "A", "An", "In", "It", "He", "She", "They", "But", "And", "When", "This", "That",
    "These", "Those", "On", "At", "As", "If", "Of", "For", "To", "By", "With", "We", "I", "You",
    "His", "Her", "Their", "Its", "Our", "After", "Before", "While", "Then", "There", "Here",
    "So", "Or", "Yet", "From", "Into", "Over", "Under", "During", "Although", "Because", "Since",
    "Who", "What", "Where", "Why", "How", "Which", "Each", "Every", "All", "Some", "Many", "Most",
    "One", "Two", "No", "Not", "Yes", "Is", "Was", "Are", "Were", "Be", "Also", "However",
}
_NAME_RE = re.compile(r"\b[A-Z][A-Za-z0-9'\-]*(?:[ \t]+[A-Z][A-Za-z0-9'\-]*)*\b")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'\-]{2,}")


def _h(text: str) -> int:
    """Stable hash (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def _clean(text: str, limit: int = 240) -> str:
    """One line, no delimiters, bounded length: safe inside a tuple record."""
    text = re.sub(r"\s+", " ", text.replace(TUPLE, " ").replace(RECORD, " ").replace('"', "'")).strip()
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return text


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|(?<=[。！？])|\n{2,}", text) if s.strip()]


_HAN = re.compile(r"[\u4e00-\u9fff]")


def _chinese(text: str) -> bool:
    """The model answers in Chinese when what it answers about is mostly Chinese."""
    han = len(_HAN.findall(text))
    return han > 0 and han >= len(re.findall(r"[A-Za-z]", text)) / 4


def _names(sentence: str) -> list[str]:
    out: list[str] = []
    if _HAN.search(sentence):
        # A model reading Chinese names its people, places and organisations as written.
        import jieba.posseg

        out.extend(dict.fromkeys(p.word for p in jieba.posseg.cut(sentence)
                                 if p.flag in ("nr", "ns", "nt") and len(p.word) >= 2 and _HAN.match(p.word)))
    for m in _NAME_RE.finditer(sentence):
        words = m.group(0).split()
        while words and words[0] in _STOP:
            words.pop(0)
        words = words[:3]
        if not words or (len(words) == 1 and len(words[0]) < 2):
            continue
        name = " ".join(words).upper()
        if name not in out:
            out.append(name)
    return out


# --------------------------------------------------------------------------- prompt kinds


def _messages(req: dict) -> tuple[str, str]:
    """(system prompt, last user message) of a chat request."""
    msgs = req.get("messages") or []
    system = "\n".join(str(m.get("content") or "") for m in msgs if m.get("role") == "system")
    users = [m for m in msgs if m.get("role") == "user"]
    return system, (str(users[-1].get("content") or "") if users else "")


def template_data(name: str, text: str) -> Optional[dict[str, str]]:
    """The data template ``name`` was filled with to give ``text``, or None when ``text`` is not
    that template rendered (give or take surrounding whitespace): it must begin with the
    template's first fixed text, hold the middle ones in order and end with the last, so a
    template quoted inside another prompt's data is never taken for that prompt."""
    parts = prompts.fixed_text(name)
    text = text.strip()
    data: dict[str, str] = {}
    pos, field = 0, None
    for i, (fixed, next_field) in enumerate(parts):
        if i == 0:
            fixed = fixed.lstrip()
        if i == len(parts) - 1:
            fixed = fixed.rstrip()
            at = len(text) - len(fixed) if text.endswith(fixed) else -1
        else:
            at = text.find(fixed, pos)
        if at < pos or (i == 0 and at != 0):
            return None
        if field is not None:
            data.setdefault(field, text[pos:at])  # a placeholder used twice holds the same data
        pos, field = at + len(fixed), next_field
    return data


def recognise(text: str) -> Optional[tuple[str, dict[str, str]]]:
    """(template name, its data) of a prompt, or None for text rendered from no template."""
    return next(((name, data) for name in prompts.PROMPT_KINDS
                 if (data := template_data(name, text)) is not None), None)


def prompt_of(req: dict) -> Optional[tuple[str, dict[str, str]]]:
    """The template and data of a request: its last user message, else its system prompt
    (the query modes put the template there and the question in the user message)."""
    system, last = _messages(req)
    return recognise(last) or recognise(system)


def detect_kind(req: dict) -> str:
    """Which prompt of the pipeline this is (``prompts.PROMPT_KINDS``); "answer" for text
    from no template, like a question asked directly."""
    found = prompt_of(req)
    return prompts.PROMPT_KINDS[found[0]] if found else "answer"


def _entity_types(data: dict[str, str]) -> list[str]:
    line = data.get("entity_types", "").strip().strip("[]")
    types = [t.strip().strip("'\"") for t in line.split(",") if t.strip().strip("'\"")]
    return types or list(DEFAULT_ENTITY_TYPES)


def _extraction_facts(text: str, types: list[str]
                      ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str, int]]]:
    """(name, type, description) entities and (source, target, description, strength)
    relations a careful model would find in ``text``, whatever format it writes them in."""
    entities: dict[str, str] = {}
    relations: dict[tuple[str, str], str] = {}
    for sent in _sentences(text):
        names = _names(sent)
        for n in names:
            if n not in entities and len(entities) < 40:
                entities[n] = sent
        present = [n for n in names if n in entities][:5]
        for i, a in enumerate(present):
            for b in present[i + 1:]:
                pair = edge_key(a, b)
                relations.setdefault(pair, sent)
    if _chinese(text):  # descriptions in the language of the text, as the prompt asks
        return ([(n, types[_h(n) % len(types)], _clean(f"{n}在文中出现：{s}")) for n, s in entities.items()],
                [(a, b, _clean(f"{a}与{b}相关：{s}"), 1 + _h(a + b) % 10)
                 for (a, b), s in list(relations.items())[:60]])
    return ([(n, types[_h(n) % len(types)], _clean(f"{n.title()} is mentioned in the text: {s}"))
             for n, s in entities.items()],
            [(a, b, _clean(f"{a.title()} and {b.title()} are related: {s}"), 1 + _h(a + b) % 10)
             for (a, b), s in list(relations.items())[:60]])


def _extract_records(text: str, types: list[str]) -> tuple[list[str], list[str]]:
    """Entity and relationship records, like a careful model would write them."""
    entities, relations = _extraction_facts(text, types)
    ent_rows = [f'("entity"{TUPLE}{n}{TUPLE}{t}{TUPLE}{d})' for n, t, d in entities]
    rel_rows = [f'("relationship"{TUPLE}{a}{TUPLE}{b}{TUPLE}{d}{TUPLE}{w})' for a, b, d, w in relations]
    return ent_rows, rel_rows


def _messy(body: str, seed: int, lang: str, lead: str) -> str:
    """Real models sometimes fence or preface their output; parsers must cope."""
    if seed % 5 == 0:
        return f"```{lang}\n{body}\n```"
    if seed % 5 == 1:
        return f"{lead}\n\n{body}"
    return body


def _respond_extraction(data: dict[str, str]) -> str:
    text = data["input_text"]
    ents, rels = _extract_records(text, _entity_types(data))
    if not ents:
        return COMPLETE
    body = f"{RECORD}\n".join(ents + rels) + f"\n{COMPLETE}"
    return _messy(body, _h(text), "", "Here are the entities and relationships:")


def _extraction_data(req: dict) -> dict[str, str]:
    """The extraction prompt's data (chunk text, entity types) from a gleaning conversation."""
    return _conversation_data(req, "entity_extraction")


def _conversation_data(req: dict, name: str) -> dict[str, str]:
    """The data of the first user turn of a conversation rendered from template ``name``."""
    for m in req.get("messages") or []:
        if m.get("role") == "user":
            data = template_data(name, str(m.get("content") or ""))
            if data is not None:
                return data
    return {}


def _respond_gleaning_continue(req: dict) -> str:
    data = _extraction_data(req)
    text = data.get("input_text", "")
    if not text or _h(text) % 2:
        return COMPLETE
    known = {w for n in _names(text) for w in n.split()}
    candidates = sorted(
        {w.lower() for w in _WORD_RE.findall(text) if w[0].islower() and len(w) >= 8 and w.upper() not in known}
    )
    if not candidates:
        return COMPLETE
    word = candidates[_h(text) % len(candidates)]
    sent = next((s for s in _sentences(text) if word in s.lower()), text)
    types = _entity_types(data)
    name = word.upper()
    return (
        f'("entity"{TUPLE}{name}{TUPLE}{types[_h(name) % len(types)]}{TUPLE}'
        f"{_clean(f'The {word} is discussed in the text: {sent}')})\n{COMPLETE}"
    )


def _respond_gleaning_check(req: dict) -> str:
    return "YES" if len(_extraction_data(req).get("input_text", "")) > 4000 else "NO"


def _respond_summary(data: dict[str, str]) -> str:
    entity = data["entity_name"].strip().strip("[]'\"")
    body = data["description_list"]
    parts = [p.strip() for p in re.split(r"<SEP>|\n", body) if p.strip().strip("[]'\",")]
    firsts: list[str] = []
    for p in parts:
        s = _sentences(p.strip("[]'\","))
        first = s[0] if s else p
        if first not in firsts:
            firsts.append(first)
    summary = " ".join(firsts)
    if len(summary) > 600:
        summary = summary[:597].rstrip() + "..."
    if entity and not summary.upper().startswith(entity.upper()):
        summary = f"{entity.title()}: {summary}"
    return summary or f"{entity.title()} is described in the source text."


def _table_rows(prompt: str, header: str) -> list[list[str]]:
    i = prompt.find(header)
    if i == -1:
        return []
    lines: list[str] = []
    for line in prompt[i + len(header):].splitlines():
        s = line.strip()
        if s.startswith("```"):
            continue
        if s.startswith("-----") or (not s and lines):
            break
        if s:
            lines.append(s)
    rows = [[c.strip().strip('"') for c in r] for r in csv.reader(lines, skipinitialspace=True)]
    if rows and rows[0] and rows[0][0].lower() == "id":
        rows = rows[1:]
    return [r for r in rows if len(r) >= 2]


def _respond_report(data: str) -> str:
    rows = _table_rows(data, "-----Entities-----")
    ents = [(r[1], r[3] if len(r) > 3 else "") for r in rows if r[1]]
    seed = _h(data)
    if not ents:
        report: dict[str, Any] = {
            "title": "Unnamed Community",
            "summary": "The community data contains no identifiable entities.",
            "rating": 0.0,
            "rating_explanation": "There is nothing of impact to assess.",
            "findings": [],
        }
    elif _chinese(data):
        names = [e[0] for e in ents]
        report = {
            "title": f"{names[0]}与{names[1]}社区" if len(names) > 1 else f"{names[0]}社区",
            "summary": f"该社区以{names[0]}为中心，与{'、'.join(names[1:4]) or '其他实体'}相关，共有{len(ents)}个实体。",
            "rating": round(1.0 + (seed % 81) / 10.0, 1),
            "rating_explanation": f"评分反映了{names[0]}在{len(ents)}个实体中的作用。",
            "findings": [{"summary": f"{name}的作用", "explanation": _clean(desc or f"{name}出现在社区数据中。", 400)}
                         for name, desc in ents[:5]],
        }
    else:
        names = [e[0].title() for e in ents]
        others = ", ".join(names[1:4]) or "no other entities"
        report = {
            "title": f"{names[0]} and {names[1]} Community" if len(names) > 1 else f"{names[0]} Community",
            "summary": f"The community centres on {names[0]}, which is linked to {others}. "
            f"It spans {len(ents)} entities drawn from the source text.",
            "rating": round(1.0 + (seed % 81) / 10.0, 1),
            "rating_explanation": f"The impact rating reflects the role of {names[0]} among its {len(ents)} entities.",
            "findings": [
                {
                    "summary": f"The role of {name.title()}",
                    "explanation": _clean(desc or f"{name.title()} appears in the community data.", 400),
                }
                for name, desc in ents[:5]
            ],
        }
    return _messy(json.dumps(report, indent=2, ensure_ascii=False), seed, "json", "Here is the community report:")


def _data_words(text: str, limit: int = 8) -> list[str]:
    """Leading words of the first content rows of a context block, skipping headers and markers."""
    out: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("-", "#", "```", "|")) or s.lower().startswith(("id,", "id\t")):
            continue
        s = re.sub(r"^\d+\s*,\s*", "", s).replace('"', "")
        words = s.split()
        if len(words) >= 3:
            out.extend(words)
        elif len(_HAN.findall(s)) >= 8:  # Chinese writes no spaces: a line's opening is the quote
            out.append(s[:30])
        if len(out) >= limit:
            break
    return out[:limit]


def _respond_global_map(data: str) -> str:
    words = _data_words(data)
    if len(words) < 3:
        return json.dumps({"points": [{"description": "I don't know.", "score": 0}]})
    quote = " ".join(words[:6])
    points = [
        {"description": f"The reports state that {quote}.", "score": 40 + _h(data) % 60},
        {"description": f"They also mention {' '.join(words[3:8]) or quote}.", "score": 10 + _h(quote) % 40},
    ]
    return json.dumps({"points": points})


def _respond_answer(context: str, last: str) -> str:
    words = _data_words(context)
    question = re.sub(r"\s+", " ", last).strip()[:120]
    if not words:
        return f"I don't have enough information in the provided context to answer: {question}"
    quote = " ".join(words[:6])
    if _chinese(question):  # answers come in the question's language
        return f"根据所给的上下文，问题“{question}”的答案如下：资料中写道“{quote}”。"
    return (
        f"Based on the provided context, the answer concerns {question.rstrip('?')}. "
        f"The sources note that \"{quote}\". "
        f"Taken together, this suggests the key points are covered by the data above."
    )


def _citable_numbers(data: str) -> list[int]:
    """The numbers a cited prompt's data offers: ``[n]`` markers (numbered chunks, analyst
    points) and the id column of its Sources and Reports tables."""
    found = [int(n) for n in re.findall(r"\[(\d+)\]", data)]
    section, in_table = "", False
    for line in data.splitlines():
        title = re.fullmatch(r"-----(\w+)-----", line.strip())
        if title:
            section = title.group(1)
        elif line.startswith("```"):
            in_table = line.startswith("```csv")
        elif in_table and section in ("Sources", "Reports") and (row := re.match(r"(\d+),", line)):
            found.append(int(row.group(1)))
    return list(dict.fromkeys(found))


def _respond_cited_answer(data: str, last: str) -> str:
    """An answer citing up to six of the numbers its data offers, one sentence each."""
    numbers = _citable_numbers(data)[:6]
    answer = _respond_answer(data, last)
    if not numbers:
        return answer
    if _chinese(last):
        return answer + "".join(f"见来源[{n}]。" for n in numbers)
    return answer + " " + " ".join(f"This is stated in source [{n}]." for n in numbers)


def _respond_cited_global_map(data: str) -> str:
    points = json.loads(_respond_global_map(data))["points"]
    numbers = _citable_numbers(data)
    for i, point in enumerate(points):
        if numbers and point["score"] > 0:
            point["description"] += f" [{numbers[min(i, len(numbers) - 1)]}]"
    return json.dumps({"points": points})
def _respond_resolution(pairs: str) -> str:
    """The scripted judge: same thing when the two names end with the same word, or when the
    two descriptions say the same words but for the names (an alternate name with nothing
    in common, KOLKATA / CALCUTTA); one line per numbered pair."""
    answers = []
    for number, first, first_says, second, second_says in re.findall(
            r'(?m)^(\d+)\. "([^"]*)"[^:\n]*:([^\n]*)\n\s*vs "([^"]*)"[^:\n]*:([^\n]*)', pairs):
        def said(name: str, text: str) -> list[str]:
            return [w for w in re.findall(r"\w+", text.lower()) if w not in name.lower().split()]

        same = first.split()[-1:] == second.split()[-1:] or said(first, first_says) == said(second, second_says)
        answers.append(f"{number}: {'yes' if same else 'no'}")
    return "\n".join(answers)


def overlap_score(query: str, passage: str) -> float:
    """The mock reranker's relevance: the share of the query's words (3+ letters) the passage holds."""
    words = {w for w in re.findall(r"\w+", query.lower()) if len(w) >= 3}
    held = set(re.findall(r"\w+", passage.lower()))
    return len(words & held) / max(len(words), 1)


def _respond_listwise_rerank(data: dict) -> str:
    """The passages' numbers by :func:`overlap_score`, best first (ties by number)."""
    passages = re.findall(r"(?m)^\[(\d+)\] (.*)$", data["passages"])
    ranked = sorted(passages, key=lambda p: (-overlap_score(data["question"], p[1]), int(p[0])))
    return " > ".join(f"[{n}]" for n, _ in ranked)


def realistic_responder(req: dict) -> str:
    """Deterministic fake model: plausible output for each prompt kind of the pipeline."""
    system, last = _messages(req)
    found = prompt_of(req)
    if found is None:
        return _respond_answer(system or last, last)
    name, data = found
    kind = prompts.PROMPT_KINDS[name]
    if kind == "extraction":
        return _respond_extraction(data)
    if kind == "gleaning_continue":
        return _respond_gleaning_continue(req)
    if kind == "gleaning_check":
        return _respond_gleaning_check(req)
    if kind == "summary":
        return _respond_summary(data)
    if kind == "report":
        return _respond_report(data["input_text"])
    if kind == "resolution":
        return _respond_resolution(data["pairs"])
    if kind == "global_map":
        return _respond_global_map(data["context_data"])
    if kind == "cited_global_map":
        return _respond_cited_global_map(data["context_data"])
    if kind == "rerank":
        return _respond_listwise_rerank(data)
    if kind == "cited_answer":
        return _respond_cited_answer("\n".join(v for f, v in data.items() if f != "response_type"), last)
    # Repair turns: the conversation's first prompt says what to answer again.
    if kind == "extraction_repair":
        first = _extraction_data(req)
        return _respond_extraction(first) if first else COMPLETE
    if kind == "report_repair":
        return _respond_report(_conversation_data(req, "community_report").get("input_text", ""))
    if kind == "global_map_repair":
        return _respond_global_map((template_data("global_map_rag_points", system) or {}).get("context_data", ""))
    # The answer prompts: quote the data they were filled with, not the template's own text.
    return _respond_answer("\n".join(data.values()), last)


# --------------------------------------------------------------------------- weak models

# How small local models answer a prompt whose format they do not follow:
# "records" (as asked), "prose" (no records at all), "json" (a JSON list of entity and
# relation objects), "table" (fenced markdown tables), "think" (a <think> block, holding a
# stray record, before the records), "empty" (an empty answer), "nothing" (only the
# completion marker: a well-formed answer for a chunk with no entities).
WEAK_STYLES = ("records", "prose", "json", "table", "think", "empty", "nothing")
_EXTRACTION_KINDS = ("extraction", "extraction_repair")
_REPORT_KINDS = ("report", "report_repair", "global_map", "global_map_repair")


def _prose(text: str) -> str:
    first = (_sentences(text) or ["the passage"])[0]
    return (f"This example is a great example of the creative process behind the text. "
            f"It tells us that {_clean(first, 160)} Overall, it is a story worth reading.")


def _styled_extraction(style: str, data: dict[str, str]) -> str:
    text = data.get("input_text", "")
    entities, relations = _extraction_facts(text, _entity_types(data))
    if style == "prose":
        return _prose(text)
    if style == "json":
        return json.dumps([{"name": n.title(), "type": t, "description": d} for n, t, d in entities]
                          + [{"source": a.title(), "target": b.title(), "description": d, "strength": w}
                             for a, b, d, w in relations], indent=1)
    if style == "table":
        rows = "\n".join(f"| {n.title()} | {t} | {d.replace('|', '/')} |" for n, t, d in entities)
        links = "\n".join(f"| {a.title()} | {b.title()} | {d.replace('|', '/')} | {w} |" for a, b, d, w in relations)
        return (f"Here are the entities:\n\n```markdown\n| Entity | Type | Description |\n|---|---|---|\n{rows}\n```\n\n"
                f"And the relationships:\n\n| Source | Target | Description | Strength |\n|---|---|---|---|\n{links}\n")
    if style == "think":
        return (f'<think>The user wants records like ("entity"{TUPLE}THOUGHT{TUPLE}person{TUPLE}a stray idea). '
                f"Let me read the text carefully.</think>\n" + _respond_extraction(data))
    if style == "nothing":
        return COMPLETE
    return _respond_extraction(data)


def records_responder(passages: dict[str, list[str]], always: tuple[str, ...] = ()) -> Responder:
    """A model answering the extraction of a passage that holds a key of ``passages`` with
    those records (``("entity"<|>...)``, ``("relationship"<|>...)``), as written, then the
    ``always`` records, and no gleanings; every other prompt as ``realistic_responder``. For a
    test that needs exactly what a model wrote: types left out, a name given only as a
    relation's end."""

    def respond(req: dict) -> str:
        found = prompt_of(req)
        kind = found[0] if found else None
        if kind == "entity_extraction":
            text = found[1]["input_text"]  # type: ignore[index]
            records = [r for key, written in passages.items() if key in text for r in written]
            return "##\n".join([*records, *always]) + COMPLETE
        if kind == "entity_if_loop_extraction":
            return "NO"
        if kind == "entity_continue_extraction":
            return COMPLETE
        return realistic_responder(req)

    return respond


def weak_responder(extraction: str = "prose", extraction_repair: Optional[str] = None,
                   reports: str = "records", reports_repair: Optional[str] = None) -> Responder:
    """A model that answers extraction (and its repair turn) in the ``extraction`` style
    (``WEAK_STYLES``; ``extraction_repair`` for the repair turn, default the same), and
    community reports and global map answers in ``reports`` ("prose", "think", "empty" or
    "records"; ``reports_repair`` for their repair turns). The rest as ``realistic_responder``."""
    for style in (extraction, extraction_repair, reports, reports_repair):
        if style is not None and style not in WEAK_STYLES:
            raise ValueError(f"unknown weak-model style {style!r}")

    def respond(req: dict) -> str:
        kind = detect_kind(req)
        if kind in _EXTRACTION_KINDS:
            style = extraction_repair if kind == "extraction_repair" and extraction_repair else extraction
            return "" if style == "empty" else _styled_extraction(style, _extraction_data(req))
        if kind.startswith("gleaning") and extraction != "records":
            return COMPLETE if kind == "gleaning_continue" else "NO"
        if kind in _REPORT_KINDS:
            style = reports_repair if kind.endswith("_repair") and reports_repair else reports
            if style == "empty":
                return ""
            if style == "prose":
                return _prose(_messages(req)[1])
            if style == "think":
                return "<think>A report needs {braces} and a title.</think>\n" + realistic_responder(req)
        return realistic_responder(req)

    return respond


def fake_embedding(text: str, dim: int) -> list[float]:
    """Hashed bag of words, L2-normalised: deterministic, and similar texts land close."""
    vec = [0.0] * dim
    tokens = re.findall(r"\w+", text.lower()) or [text]
    for tok in tokens:
        h = _h(tok)
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[_h(text) % dim] = 1.0
        return vec
    return [v / norm for v in vec]


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour, consumed by the next chat request."""

    kind: str  # "status" | "reset" | "delay" | "empty" | "text"
    status_code: int = 0
    retry_after: Optional[float | str] = None
    seconds: float = 0.0
    content: str = ""

    @classmethod
    def status(cls, code: int, retry_after: Optional[float | str] = None, message: str = "") -> "Fault":
        """An error answer; ``message`` (default: "injected status N") is the server's wording."""
        return cls("status", status_code=code, retry_after=retry_after, content=message)

    @classmethod
    def reset(cls) -> "Fault":
        return cls("reset")

    @classmethod
    def delay(cls, seconds: float) -> "Fault":
        return cls("delay", seconds=seconds)

    @classmethod
    def empty(cls) -> "Fault":
        return cls("empty")

    @classmethod
    def text(cls, content: str) -> "Fault":
        return cls("text", content=content)


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True
    mock: "MockLLMServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("mock server: error handling request from %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, the body
    # waits for the client's delayed ACK (~40 ms a request), which real servers avoid.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("mock server: " + format, *args)

    def setup(self) -> None:
        super().setup()
        with self.server.mock._lock:
            self.server.mock.connections += 1
            self.server.mock.open_connections += 1

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.mock._lock:
                self.server.mock.open_connections -= 1

    def _send_json(self, code: int, obj: Any, headers: Optional[dict[str, str]] = None) -> None:
        body = json.dumps(obj).encode("utf-8")
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. its timeout fired)

    def _read_json(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            data = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            data = {}
        return data if isinstance(data, dict) else {}

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "mock"}
                for m in ("gpt-4o", "gpt-4o-mini", "text-embedding-3-small")
            ]})
        elif self.path.rstrip("/").endswith("/mock/stats"):
            self._send_json(200, self.server.mock.stats())  # type: ignore[attr-defined]
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        arrived = time.monotonic()
        req = self._read_json()
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/chat/completions"):
            self.server.mock._chat(self, req, arrived)
        elif path.endswith("/embeddings"):
            self.server.mock._embeddings(self, req)
        elif path.endswith("/rerank"):
            self.server.mock._rerank(self, req)
        else:
            self._send_json(404, {"error": {"message": f"unknown path {self.path}", "type": "invalid_request_error"}})

    def reset_connection(self) -> None:
        """Abort with RST and no response, like a proxy or server crash."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass
        self.close_connection = True


class MockLLMServer:
    """OpenAI-compatible HTTP server on a background thread; see the module docstring."""

    def __init__(
        self,
        responder: Optional[Responder] = None,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        embedding_dim: int = 64,
        context_window: Optional[int] = None,
        stream_chunk_delay: float = 0.0,
    ) -> None:
        self.responder: Responder = responder or realistic_responder
        # Seconds between the pieces of a streamed answer (``stream=true``).
        self.stream_chunk_delay = stream_chunk_delay
        self.latency = latency
        # Longer prompts get the 400 a real server sends (None: no limit).
        self.context_window = context_window
        self.host = host
        self.port = port
        self.embedding_dim = embedding_dim
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._embedding_faults: list[Fault] = []  # status faults for /embeddings, consumed in order
        self._in_flight = 0
        self.requests: list[dict] = []
        self.peak_concurrency = 0
        self.connections = 0  # TCP connections accepted
        self.open_connections = 0  # accepted and not closed yet
        self.calls_by_kind: Counter[str] = Counter()
        self.rerank_requests: list[dict] = []
        self._httpd: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None

    def _rerank(self, handler: "_Handler", req: dict) -> None:
        """A rerank endpoint: Cohere / Jina's answer when the request names a model, TEI's
        otherwise; scored by :func:`overlap_score`."""
        with self._lock:
            self.rerank_requests.append(req)
        passages = req.get("documents") or req.get("texts") or []
        scored = sorted(({"index": i, "score": overlap_score(req.get("query", ""), p)} for i, p in enumerate(passages)),
                        key=lambda r: -r["score"])
        if req.get("model"):
            handler._send_json(200, {"results": [{"index": r["index"], "relevance_score": r["score"]} for r in scored]})
        else:
            handler._send_json(200, scored)

    # lifecycle -------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "MockLLMServer":
        if self._httpd is not None:
            return self
        httpd = _Server((self.host, self.port), _Handler)
        httpd.mock = self
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="mock-llm-server", daemon=True
        )
        self._thread.start()
        logger.debug("mock LLM server listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "MockLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # control ---------------------------------------------------------------
    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    def inject_embedding(self, *faults: Fault) -> None:
        """Status faults answered by the next ``/embeddings`` requests (chat requests keep theirs)."""
        with self._lock:
            self._embedding_faults.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self._embedding_faults.clear()
            self.requests.clear()
            self.calls_by_kind.clear()
            self.rerank_requests.clear()
            self.peak_concurrency = self._in_flight
            self.connections = 0

    def stats(self) -> dict[str, Any]:
        """What ``GET /mock/stats`` answers: how many chat requests were in flight at most, and
        of which kinds (a process driving the server from outside can check its limits)."""
        with self._lock:
            return {"peak_concurrency": self.peak_concurrency, "in_flight": self._in_flight,
                    "connections": self.connections, "calls_by_kind": dict(self.calls_by_kind)}

    @property
    def chat_requests(self) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if "messages" in r]

    # endpoints -------------------------------------------------------------
    def _chat(self, h: _Handler, req: dict, arrived: float) -> None:
        with self._lock:
            self.requests.append(req)
            fault = self._faults.pop(0) if self._faults else None
            self._in_flight += 1
            self.peak_concurrency = max(self.peak_concurrency, self._in_flight)
            try:
                kind = detect_kind(req)
            except Exception:
                kind = "unknown"
            self.calls_by_kind[kind] += 1
        try:
            if fault is not None and fault.kind == "delay":
                time.sleep(fault.seconds)
                fault = None
            if fault is not None and fault.kind == "reset":
                self._wait_until(arrived + self.latency)
                h.reset_connection()
                return
            if fault is not None and fault.kind == "status":
                headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
                self._wait_until(arrived + self.latency)
                h._send_json(fault.status_code, {"error": {
                    "message": fault.content or f"injected status {fault.status_code}",
                    "type": "rate_limit_error" if fault.status_code == 429 else "server_error",
                    "code": None,
                }}, headers)
                return
            overflow = self._context_overflow(req)
            if overflow is not None:
                h._send_json(400, {"error": {"message": overflow, "type": "invalid_request_error",
                                             "param": "messages", "code": "context_length_exceeded"}})
                return
            if fault is not None and fault.kind == "empty":
                content = ""
            elif fault is not None and fault.kind == "text":
                content = fault.content
            else:
                try:
                    content = self.responder(req)
                except Exception as exc:  # a broken responder is a 500, not a hung client
                    logger.exception("mock responder failed")
                    h._send_json(500, {"error": {"message": f"responder failed: {exc}", "type": "server_error"}})
                    return
            self._wait_until(arrived + self.latency)
            if req.get("stream"):
                self._stream_completion(h, req, content)
            else:
                h._send_json(200, self._completion(req, content))
        finally:
            with self._lock:
                self._in_flight -= 1

    def _context_overflow(self, req: dict) -> Optional[str]:
        """OpenAI's message for a prompt longer than ``context_window`` tokens (counted with the
        engine's tokenizer, 4 tokens of framing per message), or None when it fits."""
        if self.context_window is None:
            return None
        from graphrag.operators.tokenizer import get_tokenizer

        tokenizer = get_tokenizer("gpt-4o")
        tokens = sum(tokenizer.count(str(m.get("content") or "")) + 4 for m in req.get("messages") or [])
        if tokens <= self.context_window:
            return None
        return (f"This model's maximum context length is {self.context_window} tokens. However, your messages "
                f"resulted in {tokens} tokens. Please reduce the length of the messages.")

    @staticmethod
    def _wait_until(deadline: float) -> None:
        """The configured latency is the whole time a request takes, the mock's own work included."""
        delay = deadline - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    @staticmethod
    def _completion(req: dict, content: str) -> dict:
        prompt_chars = sum(len(str(m.get("content") or "")) for m in req.get("messages") or [])
        p, c = max(1, prompt_chars // 4), len(content) // 4
        return {
            "id": f"chatcmpl-mock-{_h(content + str(time.time_ns())):x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.get("model", "mock"),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        }

    def _stream_completion(self, h: _Handler, req: dict, content: str) -> None:
        """``stream=true``: the answer as server-sent ``chat.completion.chunk`` events, a few
        words each, ``stream_chunk_delay`` seconds apart, then ``[DONE]``."""
        words = re.findall(r"\S+\s*|\s+", content) or [""]
        pieces = ["".join(words[i:i + 3]) for i in range(0, len(words), 3)]
        chunk_id = f"chatcmpl-mock-{_h(content + str(time.time_ns())):x}"

        def event(delta: dict, finish: Optional[str] = None) -> bytes:
            chunk = {"id": chunk_id, "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": req.get("model", "mock"),
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(chunk)}\n\n".encode("utf-8")

        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Connection", "close")  # no length: the stream ends with the connection
            h.end_headers()
            h.wfile.write(event({"role": "assistant", "content": ""}))
            for i, piece in enumerate(pieces):
                if i and self.stream_chunk_delay:
                    time.sleep(self.stream_chunk_delay)
                h.wfile.write(event({"content": piece}))
                h.wfile.flush()
            h.wfile.write(event({}, "stop") + b"data: [DONE]\n\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        h.close_connection = True

    def _embeddings(self, h: _Handler, req: dict) -> None:
        with self._lock:
            self.requests.append(req)
            fault = self._embedding_faults.pop(0) if self._embedding_faults else None
        if fault is not None:
            h._send_json(fault.status_code, {"error": {"message": fault.content or f"injected status {fault.status_code}",
                                                       "type": "server_error", "code": None}})
            return
        inp = req.get("input", [])
        texts = [inp] if isinstance(inp, str) else list(inp)
        texts = [t if isinstance(t, str) else " ".join(map(str, t)) if isinstance(t, list) else str(t) for t in texts]
        data = [{"object": "embedding", "index": i, "embedding": fake_embedding(t, self.embedding_dim)}
                for i, t in enumerate(texts)]
        tokens = sum(len(t) // 4 for t in texts)
        h._send_json(200, {"object": "list", "data": data, "model": req.get("model", "mock"),
                           "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def main(argv: Optional[list[str]] = None) -> None:
    """Run the mock server in the foreground (benchmarks, manual use)."""
    ap = argparse.ArgumentParser(description="Local OpenAI-compatible mock LLM server.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds every chat request takes, the mock's own work included")
    ap.add_argument("--embedding-dim", type=int, default=64)
    ap.add_argument("--context-window", type=int, default=None, help="refuse longer prompts with a 400, as a real server does")
    ap.add_argument("--weak-extraction", choices=WEAK_STYLES, default=None,
                    help="answer extraction prompts like a weak model (see weak_responder)")
    ap.add_argument("--weak-reports", choices=("records", "prose", "think", "empty"), default="records",
                    help="with --weak-extraction: how community reports and global map answers come")
    args = ap.parse_args(argv)
    # Many handler threads wake at their deadlines while others compute answers; with the
    # default 5 ms GIL switch interval a woken thread queues behind them and the latency
    # drifts above the configured value.
    sys.setswitchinterval(0.0002)
    responder = weak_responder(args.weak_extraction, reports=args.weak_reports) if args.weak_extraction else None
    server = MockLLMServer(responder=responder, latency=args.latency, host=args.host, port=args.port,
                           embedding_dim=args.embedding_dim, context_window=args.context_window)
    server.start()
    print(f"mock LLM server on {server.base_url}  (OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=x)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
