"""The mock server tells prompts apart by their templates' own text (``prompts.fixed_text``),
not by phrases copied out of them: rewording a template can neither break the tests nor make
one prompt pass for another."""
from __future__ import annotations

import json
import string
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Optional

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding, prompts
from mock_llm_server import MockLLMServer, detect_kind, prompt_of, realistic_responder, recognise, template_data

# The chunk quotes the phrases the mock once recognised prompts by; they must not sway it.
STORY = (
    "Marta Lindqvist left the Harbour Weaving Guild and opened a workshop in Norrvik, where she "
    "trains apprentices. Her ledger reads: -Real Data- -Community Data- Description List: "
    "---Data tables--- \"points\" MANY entities were missed. Answer YES | NO."
)
TABLE = ("-----Entities-----\n```csv\nid,entity,type,description,degree\n"
         "0,MARTA LINDQVIST,person,A weaver who trains apprentices,2\n1,NORRVIK,geo,A harbour town,1\n```")
SAMPLE = {
    "entity_types": "person, organization, geo",
    "input_text": STORY,
    "entity_name": "MARTA LINDQVIST",
    "description_list": "Marta Lindqvist is a weaver.<SEP>Marta Lindqvist trains apprentices in Norrvik.",
    "context_data": TABLE,
    "report_data": "----Analyst 0----\nImportance Score: 80\nMarta Lindqvist trains apprentices in Norrvik.",
    "content_data": "--New Chunk--\nMarta Lindqvist opened her own workshop in Norrvik.",
    "response_type": "Multiple Paragraphs",
}
SAMPLE_FOR = {"community_report": {"input_text": TABLE}}
QUESTION = "Who trains apprentices in Norrvik?"


def sample(name: str) -> dict[str, str]:
    """Data for every placeholder of template ``name``."""
    fields = [f for _, f in prompts.fixed_text(name) if f]
    return {f: SAMPLE_FOR.get(name, {}).get(f, SAMPLE.get(f, f"{f} of Marta Lindqvist in Norrvik")) for f in fields}


def request(name: str, prompt: str) -> dict:
    """A chat request as the engine sends prompt ``name``: the query prompts as the system
    prompt before the question, gleaning turns after the extraction turn, others alone."""
    kind = prompts.PROMPT_KINDS[name]
    if kind in ("global_map", "answer", "cited_global_map", "cited_answer"):
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": QUESTION}]
    elif kind.startswith("gleaning") or kind == "extraction_repair":
        extraction = prompts.render("entity_extraction", **sample("entity_extraction"))
        messages = [{"role": "user", "content": extraction}, {"role": "assistant", "content": prompts.COMPLETION_DELIMITER},
                    {"role": "user", "content": prompt}]
    elif kind == "report_repair":  # after a report turn answered in prose
        report = prompts.render("community_report", **sample("community_report"))
        messages = [{"role": "user", "content": report}, {"role": "assistant", "content": "A fine community."},
                    {"role": "user", "content": prompt}]
    elif kind == "global_map_repair":  # the map prompt stays the system prompt
        system = prompts.render("global_map_rag_points", **sample("global_map_rag_points"))
        messages = [{"role": "system", "content": system}, {"role": "user", "content": QUESTION},
                    {"role": "assistant", "content": "Norrvik, I think."}, {"role": "user", "content": prompt}]
    else:
        messages = [{"role": "user", "content": prompt}]
    return {"model": "gpt-4o", "messages": messages}


def reword(template: str) -> str:
    """``template`` in new words: a sentence added before and after, and every letter of its own
    text in the other case, so no phrase of the old wording is left; placeholders kept."""
    out = ["Read all of what follows with care.\n"]
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        out.append(literal.swapcase().replace("{", "{{").replace("}", "}}"))
        if field is not None:
            out.append("{" + field + "}")
    out.append("\nThank you.\n")
    return "".join(out)


def templates_matching(text: str) -> list[str]:
    return [name for name in prompts.PROMPT_KINDS if template_data(name, text) is not None]


def test_every_template_is_named_and_every_prompt_has_one_kind() -> None:
    files = {p.name[: -len(".txt")] for p in resources.files(prompts).iterdir() if p.name.endswith(".txt")}
    assert files == set(prompts.TEMPLATE_NAMES)
    # fail_response is the canned reply to the user, never sent to a model.
    assert set(prompts.PROMPT_KINDS) == files - {"fail_response"}


@pytest.mark.parametrize("name", list(prompts.PROMPT_KINDS))
def test_a_prompt_is_recognised_as_its_own_template_only(name: str) -> None:
    data = sample(name)
    prompt = prompts.render(name, **data)
    assert templates_matching(prompt) == [name]
    assert recognise(prompt) == (name, data)  # the data is read back exactly
    assert detect_kind(request(name, prompt)) == prompts.PROMPT_KINDS[name]


@pytest.mark.parametrize("name", list(prompts.PROMPT_KINDS))
def test_a_reworded_template_is_recognised_and_answered_alike(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = sample(name)
    answer = realistic_responder(request(name, prompts.render(name, **data)))
    if name.endswith("_repair"):  # answered from the conversation's first prompt, as that prompt would be
        assert answer not in ("", prompts.COMPLETION_DELIMITER) and "I don't know" not in answer
    old_lines = [line for fixed, _ in prompts.fixed_text(name) for line in fixed.splitlines()
                 if any(c.isalpha() for c in line)]

    copy = tmp_path / f"{name}.txt"
    copy.write_text(reword(prompts.load(name)), encoding="utf-8")
    load = prompts.load
    monkeypatch.setattr(prompts, "load", lambda n: copy.read_text(encoding="utf-8") if n == name else load(n))
    assert not [line for line in old_lines if line in prompts.load(name)]  # nothing of the old wording left

    reworded = prompts.render(name, **data)
    assert templates_matching(reworded) == [name]
    assert recognise(reworded) == (name, data)
    req = request(name, reworded)
    assert detect_kind(req) == prompts.PROMPT_KINDS[name]
    assert realistic_responder(req) == answer


def test_indexing_and_every_query_mode_with_every_template_reworded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: MockLLMServer
) -> None:
    copies = tmp_path / "prompts"
    copies.mkdir()
    for name in prompts.TEMPLATE_NAMES:
        (copies / f"{name}.txt").write_text(reword(prompts.load(name)), encoding="utf-8")
    monkeypatch.setattr(prompts, "load", lambda name: (copies / f"{name}.txt").read_text(encoding="utf-8"))

    rag = GraphRAG(working_dir=str(tmp_path / "index"), embedding_func=hash_embedding(64),
                   llm_base_url=llm_server.base_url, llm_api_key="k", chunk_token_size=200,
                   chunk_overlap_token_size=20, entity_extract_max_gleaning=2, entity_summary_to_max_tokens=20,
                   entity_resolution_llm_check=True, rerank="llm", show_progress=False)
    stats = rag.insert([
        STORY,
        "Marta Lindqvist sells cloth to the Norrvik Market every week. The Norrvik Market is run by Jonas Berg.",
        "Jonas Berg and Marta Lindqvist founded the Norrvik Weavers Circle, which meets in the Harbour Weaving Guild.",
    ])
    answers = [rag.query(QUESTION, QueryParam(mode=mode, with_references=cited))
               for mode in ("local", "global", "naive") for cited in (False, True)]

    found: Counter[Optional[str]] = Counter()
    for req in llm_server.chat_requests:
        template = prompt_of(req)
        found[template[0] if template else None] += 1
    # Every prompt was sent and none went unrecognised; repair turns only follow an answer
    # that ignored the format, which this server never gives.
    assert set(found) == {name for name in prompts.PROMPT_KINDS if not name.endswith("_repair")}
    assert found["local_rag_response"] == found["naive_rag_response"] == found["global_reduce_rag_response"] == 1
    kinds, llm = llm_server.calls_by_kind, stats["llm"]
    assert kinds["extraction"] == llm["extraction"]["calls"] == stats["chunks_inserted"]
    assert kinds["gleaning_continue"] + kinds["gleaning_check"] == llm["gleaning"]["calls"]
    assert kinds["summary"] == llm["summary"]["calls"] > 0
    # A whole component of at most small_component_max_entities entities is reported without a call.
    reports = json.loads((tmp_path / "index" / "kv_store_community_reports.json").read_text(encoding="utf-8"))
    from_records = sum(r["report_source"] == "small_component" for r in reports.values())
    assert kinds["report"] == stats["reports_generated"] - from_records > 0
    assert "MARTA LINDQVIST" in rag.stores.graph.graph
    assert all(a.startswith("Based on the provided context") for a in answers), answers
