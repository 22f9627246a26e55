"""Extraction parser against messy model output, the gleaning conversation, and prompts."""
from __future__ import annotations

import asyncio
import string
from typing import Any, Optional

import pytest

from graphrag import prompts
from graphrag.operators.extraction import (
    ConversationLimit,
    extract_chunk,
    extract_chunks,
    normalize_entity_name,
    parse_extraction,
    parse_strength,
)

E = lambda n, t, d: {"name": n, "type": t, "description": d}  # noqa: E731
R = lambda s, t, d, w: {"source": s, "target": t, "description": d, "weight": w}  # noqa: E731

CLEAN = (
    '("entity"<|>"Scrooge"<|>"person"<|>"A miser.")##\n'
    '("entity"<|>"Marley"<|>"person"<|>"His late partner.")##\n'
    '("relationship"<|>"Scrooge"<|>"Marley"<|>"Business partners."<|>9)<|COMPLETE|>'
)
CLEAN_E = [E("SCROOGE", "PERSON", "A miser."), E("MARLEY", "PERSON", "His late partner.")]
CLEAN_R = [R("SCROOGE", "MARLEY", "Business partners.", 9.0)]

CASES: dict[str, tuple[str, list, list, int]] = {
    "clean": (CLEAN, CLEAN_E, CLEAN_R, 0),
    "fence_with_language": ("```json\n" + CLEAN + "\n```", CLEAN_E, CLEAN_R, 0),
    "fence_without_language": ("```\n" + CLEAN + "\n```\n", CLEAN_E, CLEAN_R, 0),
    "prose_around": ("Sure! Here is the output:\n\n" + CLEAN + "\n\nLet me know if you need more.", CLEAN_E, CLEAN_R, 0),
    "newlines_instead_of_record_delims": (CLEAN.replace("##", ""), CLEAN_E, CLEAN_R, 0),
    "stray_and_doubled_record_delims": ("##" + CLEAN.replace("##", "####\n##") + "##", CLEAN_E, CLEAN_R, 0),
    "missing_completion_marker_and_trailing_prose": (
        CLEAN.replace("<|COMPLETE|>", "") + "\nThat is everything I found.", CLEAN_E, CLEAN_R, 0
    ),
    "extra_spaces_and_newlines": (
        '  (  "entity" <|>  Scrooge  <|> person <|>\n  A   miser. )  ##\n\n\n'
        '("relationship"<|>\n"Scrooge"<|>\n"Marley"<|>\nBusiness partners.<|>\n9\n)',
        [E("SCROOGE", "PERSON", "A miser.")],
        [R("SCROOGE", "MARLEY", "Business partners.", 9.0)],
        0,
    ),
    "doubled_quotes": (
        '(""entity""<|>""Scrooge""<|>""person""<|>""A miser."")',
        [E("SCROOGE", "PERSON", "A miser.")], [], 0,
    ),
    "single_quotes_and_no_quotes": (
        "('entity'<|>'Scrooge'<|>'person'<|>'A miser.')\n(entity<|>Marley<|>person<|>His late partner.)",
        CLEAN_E, [], 0,
    ),
    "missing_closing_parenthesis": (
        '("entity"<|>"Scrooge"<|>"person"<|>"A miser."\n("relationship"<|>"Scrooge"<|>"Marley"<|>"Partners."<|>4\nDone.',
        [E("SCROOGE", "PERSON", "A miser.")], [R("SCROOGE", "MARLEY", "Partners.", 4.0)], 0,
    ),
    "mixed_case_keywords": (
        '("Entity"<|>scrooge<|>Person<|>A miser.)##("RELATIONSHIP"<|>SCROOGE<|>marley<|>Partners.<|>3)',
        [E("SCROOGE", "PERSON", "A miser.")], [R("SCROOGE", "MARLEY", "Partners.", 3.0)], 0,
    ),
    "strength_words_and_fractions": (
        '("relationship"<|>A<|>B<|>x<|>high)\n("relationship"<|>A<|>C<|>y<|>"seven")\n'
        '("relationship"<|>A<|>D<|>z<|>8/10)\n("relationship"<|>A<|>E<|>w<|>8.5)\n'
        '("relationship"<|>A<|>F<|>v)',
        [],
        [R("A", "B", "x", 8.0), R("A", "C", "y", 7.0), R("A", "D", "z", 8.0), R("A", "E", "w", 8.5), R("A", "F", "v", 1.0)],
        0,
    ),
    "markdown_bold_names": (
        '("entity"<|>**Scrooge**<|>**person**<|>A miser.)\n("relationship"<|>"**Scrooge**"<|>__Marley__<|>Partners.<|>2)',
        [E("SCROOGE", "PERSON", "A miser.")], [R("SCROOGE", "MARLEY", "Partners.", 2.0)], 0,
    ),
    "wrong_field_count_skipped": (
        '("entity"<|>Scrooge<|>person)\n("entity"<|>A<|>B<|>C<|>D)\n("relationship"<|>A<|>B)\n' + CLEAN,
        CLEAN_E, CLEAN_R, 3,
    ),
    "empty_name_and_self_loop_skipped": (
        '("entity"<|>""<|>person<|>nobody)\n("relationship"<|>Scrooge<|>"scrooge"<|>talks to himself<|>5)\n'
        '("relationship"<|><|>Marley<|>nothing<|>5)',
        [], [], 3,
    ),
    "empty_type_is_unknown": ('("entity"<|>Fog<|><|>Thick fog.)', [E("FOG", "UNKNOWN", "Thick fog.")], [], 0),
    "control_characters_stripped": (
        '("entity"<|>Scr\x00ooge\x07<|>per\x1bson<|>A\x0b miser.\ufffe)', [E("SCROOGE", "PERSON", "A miser.")], [], 0
    ),
    "parentheses_inside_description": (
        '("entity"<|>Scrooge<|>person<|>A miser (very old).)##("entity"<|>Fred<|>person<|>Nephew (kind)',
        [E("SCROOGE", "PERSON", "A miser (very old)."), E("FRED", "PERSON", "Nephew (kind)")], [], 0,
    ),
    "markdown_list_prefixes": (
        '1. ("entity"<|>Scrooge<|>person<|>A miser.)\n- ("entity"<|>Marley<|>person<|>His late partner.)',
        CLEAN_E, [], 0,
    ),
    "empty_output": ("", [], [], 0),
    "trailing_delimiter_before_paren": ('("entity"<|>Scrooge<|>person<|>A miser.<|>)', [E("SCROOGE", "PERSON", "A miser.")], [], 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_parse_catalogue(name: str) -> None:
    text, entities, relations, malformed = CASES[name]
    got_e, got_r, got_bad = parse_extraction(text)
    assert got_e == entities
    assert got_r == relations
    assert got_bad == malformed


def test_normalize_entity_name_merges_variants() -> None:
    assert {normalize_entity_name(n) for n in ["Scrooge", '"scrooge"', " SCROOGE ", "**Scrooge**", "'Scrooge'"]} == {
        "SCROOGE"
    }
    assert normalize_entity_name("  Ebenezer \n  Scrooge ") == "EBENEZER SCROOGE"
    assert normalize_entity_name("「スクルージ」") == normalize_entity_name("《スクルージ》") == "スクルージ"
    assert normalize_entity_name("Acme (UK)") == "ACME (UK)"  # brackets are part of a name, not quotes


def test_parse_strength() -> None:
    assert parse_strength("10") == 10.0
    assert parse_strength("very high") == 10.0
    assert parse_strength("nonsense") == 1.0
    assert parse_strength(None) == 1.0
    assert parse_strength('"3".') == 3.0


def test_custom_delimiters() -> None:
    text = '("entity"|A|person|x)@@("relationship"|A|B|y|2)[[DONE]]'
    ents, rels, bad = parse_extraction(text, tuple_delimiter="|", record_delimiter="@@", completion_delimiter="[[DONE]]")
    assert ents == [E("A", "PERSON", "x")]
    assert rels == [R("A", "B", "y", 2.0)]
    assert bad == 0


class FakeLLM:
    """Answers in order and records (prompt, stage, history) for each call."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str, Optional[list[dict]]]] = []

    async def __call__(self, prompt: str, *, stage: str, history_messages: Optional[list[dict]] = None, **kw: Any) -> str:
        self.calls.append((prompt, stage, history_messages))
        return self.answers.pop(0)


GLEAN1 = '("entity"<|>Fred<|>person<|>Nephew.)<|COMPLETE|>'
GLEAN2 = '("entity"<|>Belle<|>person<|>Former fiancee.)<|COMPLETE|>'


def test_max_gleaning_zero_makes_one_call() -> None:
    llm = FakeLLM([CLEAN])
    result = asyncio.run(extract_chunk("text", llm=llm, entity_types=["person"], max_gleaning=0))
    assert len(llm.calls) == 1
    prompt, stage, history = llm.calls[0]
    assert stage == "extraction" and history is None
    assert prompt.rstrip().endswith("Text: text\n######################\nOutput:")
    assert "Entity_types: person" in prompt
    assert result["entities"] == CLEAN_E and result["relations"] == CLEAN_R
    assert result["malformed"] == 0  # type: ignore[typeddict-item]


def test_gleaning_stops_on_no() -> None:
    llm = FakeLLM([CLEAN, GLEAN1, "NO", "unused"])
    result = asyncio.run(extract_chunk("text", llm=llm, entity_types=["person"], max_gleaning=3))
    assert [c[1] for c in llm.calls] == ["extraction", "gleaning", "gleaning"]
    first_prompt = llm.calls[0][0]
    cont_prompt, _, history = llm.calls[1]
    assert "MANY entities were missed in the last extraction" in cont_prompt
    assert history == [{"role": "user", "content": first_prompt}, {"role": "assistant", "content": CLEAN}]
    loop_prompt, _, loop_history = llm.calls[2]
    assert "Answer YES | NO" in loop_prompt
    assert loop_history == history + [
        {"role": "user", "content": cont_prompt},
        {"role": "assistant", "content": GLEAN1},
    ]
    assert [e["name"] for e in result["entities"]] == ["SCROOGE", "MARLEY", "FRED"]


def test_gleaning_continues_on_yes_and_stops_at_limit() -> None:
    llm = FakeLLM([CLEAN, GLEAN1, ' "Yes." ', GLEAN2])
    result = asyncio.run(extract_chunk("text", llm=llm, entity_types=["person"], max_gleaning=2))
    # No yes/no question after the last allowed gleaning.
    assert [c[1] for c in llm.calls] == ["extraction", "gleaning", "gleaning", "gleaning"]
    assert len(llm.calls[3][2] or []) == 4
    assert [e["name"] for e in result["entities"]] == ["SCROOGE", "MARLEY", "FRED", "BELLE"]


def test_gleaning_stops_where_the_conversation_would_outgrow_the_window() -> None:
    """A turn whose conversation (history and next prompt) would not fit the limit is not
    sent; what the earlier turns found is kept, and the stop is counted."""
    from graphrag.operators.tokenizer import get_tokenizer

    tokenizer = get_tokenizer("gpt-4o")
    first = asyncio.run(extract_chunk("text", llm=FakeLLM([CLEAN]), entity_types=["person"], max_gleaning=0))
    prompt = prompts.render("entity_extraction", entity_types="person", input_text="text")
    after_first = tokenizer.count(prompt) + tokenizer.count(CLEAN) + 64  # room for no continue prompt

    tight = ConversationLimit(after_first, tokenizer)
    llm = FakeLLM([CLEAN, GLEAN1])
    result = asyncio.run(extract_chunk("text", llm=llm, entity_types=["person"], max_gleaning=1, limit=tight))
    assert [c[1] for c in llm.calls] == ["extraction"] and tight.stopped == 1
    assert result == first

    roomy = ConversationLimit(after_first + 400, tokenizer)  # a gleaning turn fits, the yes/no question not
    llm = FakeLLM([CLEAN, GLEAN1 + " filler" * 300, "YES", GLEAN2])
    result = asyncio.run(extract_chunk("text", llm=llm, entity_types=["person"], max_gleaning=2, limit=roomy))
    assert [c[1] for c in llm.calls] == ["extraction", "gleaning"] and roomy.stopped == 1
    assert [e["name"] for e in result["entities"]] == ["SCROOGE", "MARLEY", "FRED"]


def test_malformed_counted_across_turns() -> None:
    llm = FakeLLM([CLEAN + '\n("entity"<|>bad)', '("relationship"<|>X<|>X<|>loop<|>1)'])
    result = asyncio.run(extract_chunk("t", llm=llm, entity_types=["person"], max_gleaning=1))
    assert result["malformed"] == 2  # type: ignore[typeddict-item]


def test_extract_chunks_runs_all_and_reports() -> None:
    seen: list[str] = []

    async def llm(prompt: str, *, stage: str, history_messages: Any = None, **kw: Any) -> str:
        await asyncio.sleep(0)
        name = prompt.rsplit("Text: ", 1)[1].split("\n", 1)[0]
        return f'("entity"<|>{name}<|>person<|>d)'

    chunks = {f"chunk-{i}": {"content": f"N{i}", "tokens": 1, "full_doc_id": "d", "chunk_order_index": i} for i in range(5)}
    out = asyncio.run(
        extract_chunks(chunks, llm=llm, entity_types=["person"], max_gleaning=0, on_done=lambda cid, _: seen.append(cid))  # type: ignore[arg-type]
    )
    assert sorted(seen) == sorted(chunks)
    assert {cid: r["entities"][0]["name"] for cid, r in out.items()} == {f"chunk-{i}": f"N{i}" for i in range(5)}


def test_a_conversation_goes_on_before_chunks_not_yet_started() -> None:
    """Through the LLM client's slots, a chunk's gleaning turn goes ahead of the first turns
    still waiting: chunks finish one after another from the start, not all at the end."""
    from graphrag.llm.client import LLMClient
    from graphrag.llm.usage import UsageCounter

    order: list[tuple[str, str]] = []

    async def model(prompt: str, history_messages: Any = None, **kw: Any) -> str:
        await asyncio.sleep(0.001)
        name = (history_messages or [{"content": prompt}])[0]["content"].rsplit("Text: ", 1)[1].split("\n", 1)[0]
        order.append((name, "glean" if history_messages else "first"))
        return f'("entity"<|>{name}<|>person<|>d)'

    client = LLMClient(model, model_id="m", max_async=2, usage=UsageCounter())
    chunks = {f"chunk-{i}": {"content": f"N{i}", "tokens": 1, "full_doc_id": "d", "chunk_order_index": i}
              for i in range(12)}
    finished: list[str] = []
    out = asyncio.run(extract_chunks(chunks, llm=client, entity_types=["person"], max_gleaning=1,  # type: ignore[arg-type]
                                     on_done=lambda cid, _: finished.append(cid)))
    assert len(order) == 24 and sorted(finished) == sorted(chunks)
    assert {cid: len(r["entities"]) for cid, r in out.items()} == {cid: 2 for cid in chunks}
    # The first chunk's second turn is asked while most first turns still wait.
    assert order.index(("N0", "glean")) < order.index(("N11", "first"))
    assert len(finished) and finished[0] in ("chunk-0", "chunk-1")


MARKERS = {
    "entity_extraction": "-Real Data-",
    "entity_continue_extraction": "MANY entities were missed in the last extraction",
    "entity_if_loop_extraction": "Answer YES | NO",
    "summarize_entity_descriptions": "Description List:",
    "community_report": "-Community Data-",
    "local_rag_response": "---Data tables---",
    "global_map_rag_points": '"points"',
    "global_reduce_rag_response": "---Analyst Reports---",
    "naive_rag_response": "---Text chunks---",
    "fail_response": "Sorry",
    "local_rag_response_cited": "by their id in square brackets",
    "naive_rag_response_cited": "---Numbered text chunks---",
    "global_map_rag_points_cited": '"points"',
    "global_reduce_rag_response_cited": "---Analyst points---",
    "entity_extraction_repair": "did not follow the output format",
    "community_report_repair": '"rating_explanation"',
    "global_map_repair": '"points"',
    "entity_resolution": "-Pairs-",
    "rerank_listwise": "Answer with the bracketed numbers only",
}


@pytest.mark.parametrize("name", prompts.TEMPLATE_NAMES)
def test_prompt_templates_render(name: str) -> None:
    template = prompts.load(name)
    fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
    values = {f: f"<<{f}>>" for f in fields}
    rendered = prompts.render(name, **values)
    assert MARKERS[name] in rendered
    for f in fields:
        assert f"<<{f}>>" in rendered or f in ("tuple_delimiter", "record_delimiter", "completion_delimiter")
    assert "{" not in rendered.replace("{{", "") or name in (
        "community_report", "global_map_rag_points", "global_map_rag_points_cited", "community_report_repair",
        "global_map_repair")


def test_prompt_placeholders_and_endings() -> None:
    expected = {
        "entity_extraction": {"entity_types", "tuple_delimiter", "record_delimiter", "completion_delimiter", "input_text"},
        "summarize_entity_descriptions": {"entity_name", "description_list"},
        "community_report": {"input_text"},
        "local_rag_response": {"context_data", "response_type"},
        "global_map_rag_points": {"context_data"},
        "global_reduce_rag_response": {"report_data", "response_type"},
        "naive_rag_response": {"content_data", "response_type"},
        "fail_response": set(),
        "entity_resolution": {"pairs"},
        "rerank_listwise": {"count", "question", "passages"},
    }
    for name, fields in expected.items():
        found = {f for _, f, _, _ in string.Formatter().parse(prompts.load(name)) if f}
        assert found == fields, name
    assert prompts.load("entity_extraction").endswith(
        "-Real Data-\n######################\nEntity_types: {entity_types}\nText: {input_text}\n"
        "######################\nOutput:\n"
    )
    report = prompts.render("community_report", input_text="DATA")
    assert "-Community Data-\nDATA" in report
    points = prompts.render("global_map_rag_points", context_data="T")
    assert '"points"' in points and "---Data tables---\nT" in points
    assert prompts.TUPLE_DELIMITER == "<|>" and prompts.RECORD_DELIMITER == "##"
    assert prompts.COMPLETION_DELIMITER == "<|COMPLETE|>" and prompts.DEFAULT_ENTITY_TYPES


def test_record_openings_match_the_plain_pattern_on_messy_text() -> None:
    """The keyword-first search finds exactly what the one plain (slow) pattern finds."""
    import random
    import re

    from graphrag.operators.extraction import _record_starts

    def plain(text: str, delimiter: str) -> list[tuple[int, int, str]]:
        quotes = "[\"'`“”‘’*]*"
        pattern = re.compile(rf"\(?\s*{quotes}\s*(entity|relationship|relation)\s*{quotes}\s*{re.escape(delimiter)}",
                             re.IGNORECASE)
        return [(m.start(), m.end(), m.group(1)) for m in pattern.finditer(text)]

    pieces = ["(", ")", " ", "\n", "\u00a0", '"', "'", "`", "“", "*", "entity", "Entity", "ENTİTY", "entıty",
              "RELATIONSHIP", "relationſhip", "relation", "relations", "<|>", "<|", "x", "<x>", "##", "e", "ntity", "(("]
    rng = random.Random(7)
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14)))
        # '"' is also a quote and "<x>" holds a letter: matches could overlap, so these are
        # searched forwards, the others backwards (the same matches either way)
        for delimiter in ("<|>", "|", '"', "<x>"):
            assert _record_starts(text, delimiter) == plain(text, delimiter), (text, delimiter)


def test_control_characters_go_from_printable_and_unprintable_text_alike() -> None:
    from graphrag.schema import strip_control_chars

    assert strip_control_chars("plain name, printable") == "plain name, printable"
    assert strip_control_chars("tab\tand\nnewline\r\nstay") == "tab\tand\nnewline\r\nstay"
    assert strip_control_chars("a\x00b\x7fc\x9fd\ud800e\uffff", "?") == "a?b?c?d?e?"
