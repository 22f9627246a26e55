"""Entity/relationship extraction: prompt the LLM per chunk and parse its tuple records.

Real model output is messy (code fences, prose, lost delimiters, odd quoting), so the
parser locates records by their ``entity``/``relationship`` keyword instead of trusting
the record delimiter, and skips (and counts) whatever it cannot read rather than raising.
An answer with no record at all is a format failure, not an empty chunk: the model is
shown the format once more (the repair turn), and a chunk still failing is reported so
that the pipeline can keep it for a retry instead of marking it done.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import re
from typing import Any, Awaitable, Callable, Optional, Protocol

from graphrag.prompts import COMPLETION_DELIMITER, RECORD_DELIMITER, TUPLE_DELIMITER, render
from graphrag.schema import ChunkExtraction, ChunkRecord, EntityRecord, RelationRecord, strip_control_chars

from .answer_formats import as_records, is_only_completion, read_other_formats, strip_reasoning
from .names import name_form
from .tokenizer import Tokenizer, fits

logger = logging.getLogger(__name__)

__all__ = [
    "LLMCall",
    "clean_text",
    "normalize_entity_name",
    "parse_strength",
    "parse_extraction",
    "read_extraction_answer",
    "extract_chunk",
    "extract_chunks",
]


class LLMCall(Protocol):
    def __call__(
        self, prompt: str, *, stage: str, history_messages: Optional[list[dict]] = None, **kwargs: Any
    ) -> Awaitable[str]: ...


# Quotes, backticks and markdown emphasis models wrap names in (CJK quotes too).
_WRAPPERS = "\"'`“”‘’「」『』《》*_ \t\r\n"
_WS = re.compile(r"\s+")
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD_STRENGTH = {
    "zero": 0.0, "one": 1.0, "two": 2.0, "three": 3.0, "four": 4.0, "five": 5.0,
    "six": 6.0, "seven": 7.0, "eight": 8.0, "nine": 9.0, "ten": 10.0,
    "very low": 1.0, "very weak": 1.0, "low": 2.0, "weak": 2.0, "moderate": 5.0,
    "medium": 5.0, "average": 5.0, "high": 8.0, "strong": 8.0, "very high": 10.0,
    "very strong": 10.0,
}  # fmt: skip
DEFAULT_STRENGTH = 1.0
# Tokens a chat template adds around each message (role markers), counted against the window.
MESSAGE_FRAMING_TOKENS = 8
# What became of a chunk (the ``status`` of ``extract_chunk``'s result): records read, a
# well-formed "nothing here" answer, or no readable record even after the repair turn.
EXTRACTED, EMPTY, FAILED = "extracted", "empty", "failed"


def clean_text(value: str) -> str:
    """Drop control characters and collapse whitespace (GraphML must stay valid)."""
    return " ".join(strip_control_chars(value).split())  # split() drops runs of \s, as \s+ would


def _unwrap(value: str) -> str:
    """Remove surrounding quotes, backticks and markdown emphasis, however deeply nested
    (``strip`` with a set of characters takes any mix of them)."""
    return value.strip(_WRAPPERS)


@functools.lru_cache(maxsize=1 << 16)
def normalize_entity_name(name: str) -> str:
    """Canonical key for an entity so "Harlow", '"harlow"' and ' **HARLOW** ' merge.

    Every extractor names entities through this (the LLM-free one too), so both name the
    same entity the same way; full-width and compatibility forms fold (``ＮＥＯ４Ｊ`` is NEO4J)."""
    return name_form(_unwrap(clean_text(name))).upper()


def parse_strength(value: Optional[str]) -> float:
    """Read a relationship strength written as a number, "8/10", or a word; default 1.0."""
    if value is None:
        return DEFAULT_STRENGTH
    text = _unwrap(clean_text(value)).lower().rstrip(".")
    match = _NUMBER.search(text)
    if match:
        return max(0.0, float(match.group()))
    return _WORD_STRENGTH.get(_WS.sub(" ", text), DEFAULT_STRENGTH)


_RECORD_QUOTES = "\"'`“”‘’*"


@functools.lru_cache(maxsize=8)
def _record_keyword(tuple_delimiter: str) -> re.Pattern[str]:
    quotes = f"[{_RECORD_QUOTES}]*"
    # Starting with a character set lets the regex engine skip ahead to candidates.
    return re.compile(rf"([er](?:ntity|elationship|elation))\s*{quotes}\s*{re.escape(tuple_delimiter)}",
                      re.IGNORECASE)


@functools.lru_cache(maxsize=8)
def _record_keyword_reversed(tuple_delimiter: str) -> Optional[re.Pattern[str]]:
    """``_record_keyword`` spelt backwards, to be run over the reversed text; None for a
    delimiter with a letter, digit, space or quote in it.

    Forwards, every "e" or "r" of an answer is a candidate start; backwards, only the
    delimiter's last character is, and the usual delimiter's is rare in prose. The matches
    are the same: the keyword is the one right before a delimiter, past only spaces and
    quotes, so neither way can a match start inside another when the delimiter has none of
    those characters.
    """
    if any(ch.isalnum() or ch.isspace() or ch in _RECORD_QUOTES for ch in tuple_delimiter):
        return None
    quotes = f"[{_RECORD_QUOTES}]*"
    return re.compile(rf"{re.escape(tuple_delimiter[::-1])}\s*{quotes}\s*((?:ytitn|pihsnoitale|noitale)[er])",
                      re.IGNORECASE)


def _keyword_matches(text: str, tuple_delimiter: str) -> list[tuple[int, int, str]]:
    """``(start, end, keyword)`` of each ``_record_keyword`` match in ``text``, in order."""
    backwards = _record_keyword_reversed(tuple_delimiter)
    if backwards is None:
        return [(m.start(), m.end(), m.group(1)) for m in _record_keyword(tuple_delimiter).finditer(text)]
    n = len(text)
    found = [(n - m.end(), n - m.start(), m.group(1)[::-1]) for m in backwards.finditer(text[::-1])]
    found.reverse()
    return found


def _record_starts(text: str, tuple_delimiter: str) -> list[tuple[int, int, str]]:
    """``(start, end, keyword)`` of every record opening, such as ``("entity"<|>``.

    The same matches as the pattern ``\\(?\\s*[quotes]*\\s*keyword...`` would give, found
    keyword first and then extended back over the decoration before it: a pattern that
    may begin with optional decoration is tried at every character, which made this the
    slowest step of parsing an answer.
    """
    starts: list[tuple[int, int, str]] = []
    floor = 0  # matches do not overlap: none starts inside the previous one
    for start, end, keyword in _keyword_matches(text, tuple_delimiter):
        while start > floor and text[start - 1].isspace():
            start -= 1
        while start > floor and text[start - 1] in _RECORD_QUOTES:
            start -= 1
        while start > floor and text[start - 1].isspace():
            start -= 1
        if start > floor and text[start - 1] == "(":
            start -= 1
        starts.append((start, end, keyword))
        floor = end
    return starts


def _cut_record(body: str, tuple_delimiter: str, full_delims: int) -> str:
    """Trim a record's raw text to the record itself, leaving trailing prose/newlines out.

    Records may span lines (a newline after a delimiter), so lines are added until one ends
    with the closing parenthesis; with no parenthesis at all, until all fields are present.
    """
    first = body.partition("\n")[0]  # the usual record: one line, closed
    if first.rstrip().endswith(")") and first.count(tuple_delimiter) >= 2:
        return first
    lines = body.split("\n")
    for i in range(len(lines)):
        joined = "\n".join(lines[: i + 1])
        if joined.rstrip().endswith(")") and joined.count(tuple_delimiter) >= 2:
            return joined
    for i in range(len(lines)):
        joined = "\n".join(lines[: i + 1])
        if joined.count(tuple_delimiter) >= full_delims:
            return joined
    # Fewer fields than a full record: keep through the last line holding a delimiter.
    last = max((i for i, line in enumerate(lines) if tuple_delimiter in line), default=0)
    return "\n".join(lines[: last + 1])


def _strip_closing_paren(body: str) -> str:
    body = body.rstrip()
    if body.endswith(")") and body.count(")") > body.count("("):
        body = body[:-1]
    return body


def parse_extraction(
    text: str,
    *,
    tuple_delimiter: str = TUPLE_DELIMITER,
    record_delimiter: str = RECORD_DELIMITER,
    completion_delimiter: str = COMPLETION_DELIMITER,
) -> tuple[list[EntityRecord], list[RelationRecord], int]:
    """Parse one extraction answer into entities, relations and the number of skipped records."""
    text = strip_control_chars(text.replace("\r\n", "\n"))
    text = _FENCE.sub("\n", text)
    text = re.sub(re.escape(completion_delimiter), "\n", text, flags=re.IGNORECASE)
    starts = _record_starts(text, tuple_delimiter)
    entities: list[EntityRecord] = []
    relations: list[RelationRecord] = []
    malformed = 0
    for i, (start, body_start, keyword) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        body = text[body_start:end]
        if record_delimiter:
            body = body.split(record_delimiter, 1)[0]
        is_entity = keyword.lower() == "entity"
        body = _strip_closing_paren(_cut_record(body, tuple_delimiter, 2 if is_entity else 3))
        fields = [f.strip() for f in body.split(tuple_delimiter)]
        while len(fields) > 1 and not _unwrap(fields[-1]):
            fields.pop()  # a trailing delimiter before ")" adds an empty field
        record = _entity(fields) if is_entity else _relation(fields)
        if record is None:
            malformed += 1
            logger.debug("skipping malformed extraction record: %r", text[start:end][:200])
        elif is_entity:
            entities.append(record)  # type: ignore[arg-type]
        else:
            relations.append(record)  # type: ignore[arg-type]
    return entities, relations, malformed


def _entity(fields: list[str]) -> Optional[EntityRecord]:
    if len(fields) != 3:
        return None
    name = normalize_entity_name(fields[0])
    if not name:
        return None
    return EntityRecord(
        name=name,
        type=normalize_entity_name(fields[1]) or "UNKNOWN",
        description=_unwrap(clean_text(fields[2])),
    )


def _relation(fields: list[str]) -> Optional[RelationRecord]:
    if len(fields) not in (3, 4):
        return None
    source, target = normalize_entity_name(fields[0]), normalize_entity_name(fields[1])
    if not source or not target or source == target:
        return None
    return RelationRecord(
        source=source,
        target=target,
        description=_unwrap(clean_text(fields[2])),
        weight=parse_strength(fields[3] if len(fields) == 4 else None),
    )


def _is_yes(answer: str) -> bool:
    return re.sub(r"[^a-z]", "", answer.strip().lower()).startswith("yes")


class ConversationLimit:
    """How long a gleaning conversation may grow: the model's window less what its next answer
    needs. Counts the turns that stopped short, for one summary line."""

    def __init__(self, max_tokens: int, tokenizer: Tokenizer) -> None:
        self.max_tokens = max_tokens
        self.tokenizer = tokenizer
        self.stopped = 0

    def admits(self, history: list[dict], next_prompt: str) -> bool:
        texts = [m["content"] for m in history] + [next_prompt]
        room = self.max_tokens - MESSAGE_FRAMING_TOKENS * len(texts)
        if fits(self.tokenizer, "\n".join(texts), room):
            return True
        self.stopped += 1
        return False


def read_extraction_answer(answer: str) -> tuple[list[EntityRecord], list[RelationRecord], int, str]:
    """Entities, relations, skipped records and the status (``EXTRACTED``, ``EMPTY`` or
    ``FAILED``) of one answer. Reasoning blocks are dropped first; tuple records are read,
    else the same facts written as JSON or markdown tables."""
    text = strip_reasoning(answer)
    entities, relations, malformed = parse_extraction(text)
    if not entities and not relations:
        other_entities, other_relations = read_other_formats(text)
        entities, relations, skipped = as_records(other_entities, other_relations, entity=_entity, relation=_relation)
        malformed += skipped
    if entities or relations:
        return entities, relations, malformed, EXTRACTED
    status = EMPTY if is_only_completion(text, COMPLETION_DELIMITER, RECORD_DELIMITER) else FAILED
    return entities, relations, malformed, status


# A conversation's next turn goes ahead of chunks not yet started (lower goes first when calls
# wait for a slot): chunks then finish one by one from the start of extraction, and what
# each finished chunk sets off (the merge, resolution's blocking, the chunk vectors) runs
# beside the calls instead of after every first turn has been answered.
FOLLOW_UP_PRIORITY = -1


async def extract_chunk(
    content: str, *, llm: LLMCall, entity_types: list[str], max_gleaning: int,
    limit: Optional[ConversationLimit] = None,
) -> ChunkExtraction:
    """Extract one chunk, then glean up to ``max_gleaning`` more turns in the same conversation,
    while it stays within ``limit``: a long first answer ends gleaning rather than the insert.
    An answer with no readable record gets one repair turn (the format shown again) first.

    Returns ``{"entities", "relations", "malformed", "status", "repaired"}`` (and ``"answer"``,
    the first answer, for a failed chunk); the keys beyond the ChunkExtraction TypedDict are
    never stored. ``malformed`` counts records the parser had to skip.
    """
    prompt = render("entity_extraction", entity_types=", ".join(entity_types), input_text=content)
    first_answer = await llm(prompt, stage="extraction")
    entities, relations, malformed, status = read_extraction_answer(first_answer)
    history: list[dict] = [{"role": "user", "content": prompt}, {"role": "assistant", "content": first_answer}]

    async def ask(prompt: str, stage: str) -> Optional[str]:
        """The answer to one more turn of the conversation, or None when it is full."""
        if limit is not None and not limit.admits(history, prompt):
            return None
        return await llm(prompt, stage=stage, history_messages=list(history), priority=FOLLOW_UP_PRIORITY)

    repaired = False
    if status == FAILED:
        repair_prompt = render("entity_extraction_repair")
        repair = await ask(repair_prompt, "extraction_repair")
        if repair is not None:
            history += [{"role": "user", "content": repair_prompt}, {"role": "assistant", "content": repair}]
            entities, relations, skipped, status = read_extraction_answer(repair)
            malformed += skipped
            repaired = status == EXTRACTED

    for turn in range(max_gleaning if status != FAILED else 0):
        continue_prompt = render("entity_continue_extraction")
        glean = await ask(continue_prompt, "gleaning")
        if glean is None:
            break
        history += [{"role": "user", "content": continue_prompt}, {"role": "assistant", "content": glean}]
        more_e, more_r, more_bad, _ = read_extraction_answer(glean)
        entities += more_e
        relations += more_r
        malformed += more_bad
        if turn == max_gleaning - 1:
            break
        verdict = await ask(render("entity_if_loop_extraction"), "gleaning")
        if verdict is None or not _is_yes(verdict):
            break
    if malformed:
        logger.debug("skipped %d malformed extraction records in a chunk", malformed)
    result: dict[str, Any] = {"entities": entities, "relations": relations, "malformed": malformed,
                              "status": status, "repaired": repaired}
    if status == FAILED:
        result["answer"] = first_answer
    return result  # type: ignore[return-value]


async def extract_chunks(
    chunks: dict[str, ChunkRecord],
    *,
    llm: LLMCall,
    entity_types: list[str],
    max_gleaning: int,
    on_done: Optional[Callable[[str, ChunkExtraction], None]] = None,
    limit: Optional[ConversationLimit] = None,
    fallback: Optional[Callable[[str], ChunkExtraction]] = None,
) -> dict[str, ChunkExtraction]:
    """Extract all chunks concurrently (the LLM client bounds concurrency); first error propagates.

    ``fallback(content)`` (e.g. the LLM-free extractor) supplies the records of a chunk the
    model failed on; the chunk keeps its ``FAILED`` status, with ``"fallback": True``.
    """

    async def one(chunk_id: str, chunk: ChunkRecord) -> tuple[str, ChunkExtraction]:
        result = await extract_chunk(
            chunk["content"], llm=llm, entity_types=entity_types, max_gleaning=max_gleaning, limit=limit
        )
        if fallback is not None and result.get("status") == FAILED:
            found = await asyncio.to_thread(fallback, chunk["content"])
            result = {**result, "entities": found["entities"], "relations": found["relations"],  # type: ignore[typeddict-item]
                      "fallback": True}
        if on_done is not None:
            on_done(chunk_id, result)
        return chunk_id, result

    done = await asyncio.gather(*(one(cid, chunk) for cid, chunk in chunks.items()))
    if limit is not None and limit.stopped:
        logger.info("Gleaning stopped early in %d of %d chunks: the conversation would not have left room "
                    "for an answer in the model's window", limit.stopped, len(chunks))
    return dict(done)
