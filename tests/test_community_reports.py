"""Community reports: fingerprint reuse, level order, budgeted context, tolerant parsing, fallbacks."""
from __future__ import annotations

import asyncio
import copy
import csv
import json

import networkx as nx
import pytest

from graphrag import prompts
from graphrag.config import GraphRAGConfig
from graphrag.llm import LLMClient, UsageCounter, openai_model_func
from graphrag.operators.community_reports import (
    build_community_context,
    community_fingerprint,
    community_tables,
    generate_community_reports,
)
from graphrag.operators.extractive_report import build_extractive_report
from graphrag.operators.format_failures import FormatFailures
from graphrag.operators.report_parsing import parse_report_json, stored_rating
from graphrag.operators.tokenizer import get_tokenizer
from graphrag.storage import NetworkXStorage

TOKENIZER = get_tokenizer("gpt-4o")


# --------------------------------------------------------------------------- fixtures


def _make_graph(tmp_path, max_cluster_size: int = 10):
    """Zachary's karate club as an entity graph; with cluster size 10 it clusters into 2 levels."""
    config = GraphRAGConfig(working_dir=str(tmp_path), max_graph_cluster_size=max_cluster_size)
    graph = NetworkXStorage(namespace="chunk_entity_relation", global_config=config)
    karate = nx.karate_club_graph()

    async def build():
        for n in karate.nodes:
            await graph.upsert_node(f"N{n}", {
                "entity_type": '"PERSON"',
                "description": f"N{n} is a member of the karate club, who trains, \"hard\", every week.",
                "source_id": f"chunk-{n % 5}",
            })
        for a, b in karate.edges:
            await graph.upsert_edge(f"N{a}", f"N{b}", {
                "weight": float(1 + (a + b) % 3),
                "description": f"N{a} trains with N{b}.",
                "source_id": f"chunk-{a % 5}",
            })
        await graph.clustering("leiden")
        return await graph.community_schema()

    communities = asyncio.run(build())
    assert {c["level"] for c in communities.values()} >= {0, 1}, "the test graph must have 2 levels"
    return graph, communities


def _prompt_entities(prompt: str) -> list[str]:
    """Entity names in the prompt's Entities table."""
    data = prompt.split("-----Entities-----", 1)[1]
    lines = []
    for line in data.split("```csv", 1)[1].splitlines()[1:]:
        if line.startswith("```"):
            break
        lines.append(line)
    rows = list(csv.reader(lines))
    assert rows[0] == ["id", "entity", "type", "description", "degree"]
    return [r[1] for r in rows[1:]]


_MESSES = [
    lambda body: f"```json\n{body}\n```",
    lambda body: f"Sure! Here is the report you asked for:\n\n{body}\n\nLet me know if you need more.",
    lambda body: body.replace('"findings": [', '"findings": [\n').replace("}\n  ]", "},\n  ]").rstrip("}") + ",\n}",
    lambda body: body,
]


class FakeLLM:
    """Records every call; answers with a messy but recoverable JSON report."""

    def __init__(self, answers=None):
        self.calls: list[tuple[str, dict]] = []
        self.answers = answers  # optional list of raw answers, consumed in order

    async def __call__(self, prompt: str, **kwargs):
        self.calls.append((prompt, kwargs))
        await asyncio.sleep(0)
        if self.answers is not None:
            return self.answers.pop(0) if self.answers else "no"
        names = _prompt_entities(prompt)
        report = {
            "title": "Report on " + " ".join(sorted(names)),
            "summary": f"A group of {len(names)} members.",
            "rating": "8/10",
            "rating_explanation": "Quite central.",
            "findings": [
                {"summary": f"{n} matters", "explanation": f"{n} trains a lot."} for n in names[:2]
            ] + ["A plain string finding"],
        }
        body = json.dumps(report, indent=2)
        return _MESSES[len(self.calls) % len(_MESSES)](body)


def _run(communities, graph, llm, existing=None, **kwargs):
    kwargs.setdefault("max_tokens", 4000)
    return asyncio.run(generate_community_reports(
        communities, graph=graph, llm=llm, tokenizer=TOKENIZER, existing=existing or {}, **kwargs))


def _community_of(prompt: str, communities) -> str:
    names = set(_prompt_entities(prompt))
    matches = [cid for cid, c in communities.items() if set(c["nodes"]) == names]
    assert len(matches) == 1
    return matches[0]


# --------------------------------------------------------------------------- generation


def test_one_call_per_community_deepest_level_first(tmp_path):
    graph, communities = _make_graph(tmp_path)
    llm = FakeLLM()
    progress: list[int] = []
    records, fresh = _run(communities, graph, llm, on_progress=progress.append)

    assert fresh == len(communities) == len(llm.calls) == sum(progress)
    called = [_community_of(p, communities) for p, _ in llm.calls]
    assert sorted(called) == sorted(communities)
    levels = [communities[cid]["level"] for cid in called]
    assert levels == sorted(levels, reverse=True)
    for (_, kwargs), cid in zip(llm.calls, called):
        # Deeper communities ask for a concurrency slot first (their parents wait on them).
        assert kwargs == {"stage": "report", "priority": -communities[cid]["level"],
                          "response_format": {"type": "json_object"}}

    assert set(records) == set(communities)
    for cid, rec in records.items():
        c = communities[cid]
        assert rec["nodes"] == c["nodes"] and rec["level"] == c["level"]
        assert rec["sub_communities"] == c["sub_communities"]
        assert rec["title"] == rec["report_json"]["title"] == "Report on " + " ".join(sorted(c["nodes"]))
        assert rec["report_json"]["rating"] == 8.0
        assert rec["report_json"]["findings"][-1] == {"summary": "A plain string finding", "explanation": ""}
        assert rec["report_string"].startswith(f"# {rec['title']}")
        assert len(rec["fingerprint"]) == 32


def test_custom_llm_kwargs_are_passed(tmp_path):
    graph, communities = _make_graph(tmp_path)
    llm = FakeLLM()
    _run(communities, graph, llm, llm_kwargs={"temperature": 0.0})
    assert all({k: v for k, v in kwargs.items() if k != "priority"} == {"stage": "report", "temperature": 0.0}
               for _, kwargs in llm.calls)


def test_second_run_with_existing_makes_no_call(tmp_path):
    graph, communities = _make_graph(tmp_path)
    first, _ = _run(communities, graph, FakeLLM())
    llm = FakeLLM()
    progress: list[int] = []
    second, fresh = _run(communities, graph, llm, existing=copy.deepcopy(first), on_progress=progress.append)
    assert fresh == 0 and llm.calls == [] and sum(progress) == len(communities)
    assert second == first


def test_report_follows_content_not_id(tmp_path):
    graph, communities = _make_graph(tmp_path)
    first, _ = _run(communities, graph, FakeLLM())
    renamed = {f"old-{cid}": rec for cid, rec in first.items()}
    llm = FakeLLM()
    second, fresh = _run(communities, graph, llm, existing=renamed)
    assert fresh == 0 and llm.calls == []
    assert {cid: r["report_json"] for cid, r in second.items()} == {cid: r["report_json"] for cid, r in first.items()}


def test_changed_entity_rereports_only_its_communities(tmp_path):
    graph, communities = _make_graph(tmp_path)
    first, _ = _run(communities, graph, FakeLLM())

    async def edit():
        node = await graph.get_node("N24")
        await graph.upsert_node("N24", {**node, "description": "N24 left the club."})
        return await graph.community_schema()

    after = asyncio.run(edit())
    llm = FakeLLM()
    second, fresh = _run(after, graph, llm, existing=first)
    containing = {cid for cid, c in after.items() if "N24" in c["nodes"]}
    assert containing and len(containing) < len(after)
    assert {_community_of(p, after) for p, _ in llm.calls} == containing
    assert fresh == len(llm.calls) == len(containing)
    for cid in after:
        if cid in containing:
            assert second[cid]["fingerprint"] != first[cid]["fingerprint"]
        else:
            assert second[cid] == first[cid]


def test_unparseable_answer_twice_falls_back_to_extractive(tmp_path):
    graph, communities = _make_graph(tmp_path)
    llm = FakeLLM(answers=[])  # "no" every time
    failures = FormatFailures("community reports")
    records, fresh = _run(communities, graph, llm, failures=failures)
    assert fresh == len(communities)
    assert len(llm.calls) == 2 * len(communities)
    repairs = [kwargs for _, kwargs in llm.calls if kwargs["stage"] == "report_repair"]
    assert len(repairs) == len(communities)
    assert all(len(kwargs["history_messages"]) == 2 for kwargs in repairs)  # the report turn, then "no"
    assert (failures.total, failures.failed, failures.repaired) == (len(communities), len(communities), 0)
    assert failures.sample == "'no'"
    for rec in records.values():
        assert rec["report_json"]["title"] and rec["report_source"] == "fallback"

    # A fallback report is not kept forever: the next LLM run tries again.
    llm2 = FakeLLM()
    again, fresh2 = _run(communities, graph, llm2, existing=records)
    assert fresh2 == len(communities) == len(llm2.calls)
    assert all(r["report_source"] == "llm" for r in again.values())


def test_repair_turn_recovers(tmp_path):
    graph, communities = _make_graph(tmp_path)
    one = {"0": communities["0"]}
    good = json.dumps({"title": "Second try", "summary": "s", "rating": 5, "rating_explanation": "r",
                       "findings": []})
    llm = FakeLLM(answers=["I cannot do that.", good])
    failures = FormatFailures("community reports")
    records, fresh = _run(one, graph, llm, failures=failures)
    assert fresh == 1 and records["0"]["title"] == "Second try" and records["0"]["report_source"] == "llm"
    (first_prompt, first), (repair_prompt, repair) = llm.calls
    assert first["stage"] == "report" and repair["stage"] == "report_repair"
    assert repair_prompt == prompts.render("community_report_repair")
    assert repair["history_messages"] == [{"role": "user", "content": first_prompt},
                                          {"role": "assistant", "content": "I cannot do that."}]
    assert (failures.failed, failures.repaired) == (0, 1)


def test_llm_errors_propagate(tmp_path):
    graph, communities = _make_graph(tmp_path)

    async def broken(prompt, **kwargs):
        raise RuntimeError("endpoint down")

    with pytest.raises(RuntimeError, match="endpoint down"):
        _run(communities, graph, broken)


def test_extractive_mode_makes_no_llm_call(tmp_path):
    graph, communities = _make_graph(tmp_path)

    async def forbidden(prompt, **kwargs):
        raise AssertionError("extractive mode must not call the LLM")

    records, fresh = _run(communities, graph, forbidden, extractive=True)
    assert fresh == len(communities) == len(records)
    for cid, rec in records.items():
        assert rec["report_source"] == "extractive"
        assert rec["title"] == rec["report_json"]["title"]
        assert set(rec["report_json"]) == {"title", "summary", "rating", "rating_explanation", "findings"}
        assert any(n in rec["title"] for n in communities[cid]["nodes"])
    # and an unchanged rerun reuses them
    again, fresh2 = _run(communities, graph, forbidden, existing=records, extractive=True)
    assert fresh2 == 0 and again == records


# --------------------------------------------------------------------------- context


def _graph_data(graph: NetworkXStorage):
    g = graph.graph
    nodes = {n: {**d, "degree": g.degree(n)} for n, d in g.nodes(data=True)}
    edges = {(a, b): dict(d) for a, b, d in g.edges(data=True)}
    return nodes, edges


def test_context_layout_and_order(tmp_path):
    graph, communities = _make_graph(tmp_path)
    nodes, edges = _graph_data(graph)
    cid = max(communities, key=lambda c: len(communities[c]["nodes"]))
    text = build_community_context(communities[cid], nodes, edges, tokenizer=TOKENIZER, max_tokens=100_000)
    assert text.startswith("-----Entities-----\n```csv\nid,entity,type,description,degree\n")
    assert "-----Relationships-----\n```csv\nid,source,target,description,rank\n" in text
    names = _prompt_entities(text)
    assert sorted(names) == communities[cid]["nodes"]
    degrees = [nodes[n]["degree"] for n in names]
    assert degrees == sorted(degrees, reverse=True)
    # descriptions with commas and quotes are CSV-quoted; the type loses its stray quotes
    assert f'0,{names[0]},PERSON,"{names[0]} is a member of the karate club, who trains, ""hard"", every week."' in text
    rel_block = text.split("-----Relationships-----", 1)[1]
    rel_rows = list(csv.reader(rel_block.split("```csv\n", 1)[1].split("```", 1)[0].splitlines()))[1:]
    assert len(rel_rows) == len(communities[cid]["edges"])
    ranks = [int(r[4]) for r in rel_rows]
    assert ranks == sorted(ranks, reverse=True)


@pytest.mark.parametrize("max_tokens", [40, 80, 150, 300, 600])
def test_context_never_exceeds_budget_and_keeps_whole_rows(tmp_path, max_tokens):
    graph, communities = _make_graph(tmp_path)
    nodes, edges = _graph_data(graph)
    for community in communities.values():
        text = build_community_context(community, nodes, edges, tokenizer=TOKENIZER, max_tokens=max_tokens)
        assert TOKENIZER.count(text) <= max_tokens
        if "-----Entities-----" in text and max_tokens >= 80:
            names = _prompt_entities(text)
            assert set(names) <= set(community["nodes"])
            # the most connected members are the ones kept
            best = sorted(community["nodes"], key=lambda n: (-nodes[n]["degree"], n))
            assert names == best[: len(names)]


def test_tables_too_large_are_counted_once(tmp_path):
    """The report stage asks a large community's tables whether they fit twice (report now
    or wait for sub-communities; then to build the context): they are counted once, and
    only until past the budget, never tokenised whole."""

    class Counting:
        def __init__(self):
            self.counted = []

        def count(self, text):
            self.counted.append(text)
            return TOKENIZER.count(text)

        def __getattr__(self, name):
            return getattr(TOKENIZER, name)

    graph, communities = _make_graph(tmp_path)
    nodes, edges = _graph_data(graph)
    community = max(communities.values(), key=lambda c: len(c["nodes"]))
    tables = community_tables(community, nodes, edges)
    budget = TOKENIZER.count(tables.text) // 2  # more bytes than tokens: the byte check cannot decide
    assert len(tables.text.encode()) > budget
    tok = Counting()
    assert not tables.fit(tok, budget) and not tables.fit(tok, budget)
    assert 0 < sum(map(len, tok.counted)) < len(tables.text)
    text = build_community_context(community, nodes, edges, tokenizer=tok, max_tokens=budget, tables=tables)
    assert tables.text not in tok.counted
    assert text == build_community_context(community, nodes, edges, tokenizer=TOKENIZER, max_tokens=budget)
    assert tables.fit(tok, 10 * budget) and tables.text not in tok.counted  # bytes decide that one


def test_large_community_is_described_by_sub_reports(tmp_path):
    graph, communities = _make_graph(tmp_path)
    nodes, edges = _graph_data(graph)
    parent_id = max((c for c in communities if communities[c]["sub_communities"]),
                    key=lambda c: len(communities[c]["nodes"]))
    parent = communities[parent_id]
    subs = {
        sid: {**communities[sid],
              "report_json": {"title": f"Sub {sid}", "summary": "short", "rating": 1.0,
                              "rating_explanation": "", "findings": []},
              "report_string": f"# Sub {sid}\n\nshort"}
        for sid in parent["sub_communities"]
    }
    full = build_community_context(parent, nodes, edges, tokenizer=TOKENIZER, max_tokens=100_000)
    budget = TOKENIZER.count(full) // 2
    text = build_community_context(parent, nodes, edges, tokenizer=TOKENIZER, max_tokens=budget, sub_reports=subs)
    assert TOKENIZER.count(text) <= budget
    assert text.startswith("-----Reports-----\n```csv\nid,title,content\n")
    by_size = sorted(parent["sub_communities"], key=lambda s: (-len(communities[s]["nodes"]), s))
    positions = [text.index(f"Sub {sid}") for sid in by_size]
    assert positions == sorted(positions)
    assert "-----Entities-----" in text  # own rows top up the remaining budget
    # without sub-reports the same budget just keeps the best own rows
    plain = build_community_context(parent, nodes, edges, tokenizer=TOKENIZER, max_tokens=budget)
    assert "-----Reports-----" not in plain and TOKENIZER.count(plain) <= budget


def test_generation_feeds_sub_reports_to_parents(tmp_path):
    graph, communities = _make_graph(tmp_path)
    llm = FakeLLM()
    records, _ = _run(communities, graph, llm, max_tokens=250)
    prompts_with_reports = [p for p, _ in llm.calls if "-----Reports-----" in p]
    assert prompts_with_reports
    for prompt, _ in llm.calls:
        data = prompt.split("-Community Data-", 1)[1].rsplit("Output:", 1)[0]
        assert TOKENIZER.count(data.strip("\n")) <= 250
    sub_titles = {records[s]["title"] for c in communities.values() for s in c["sub_communities"]}
    assert any(t in p for p in prompts_with_reports for t in sub_titles)


def test_communities_that_fit_do_not_wait_for_their_sub_communities(tmp_path):
    """Every community fits the budget: all reports are in flight together, no level waits."""
    graph, communities = _make_graph(tmp_path)
    assert any(c["sub_communities"] for c in communities.values())
    all_started = asyncio.Event()
    started = 0

    async def llm(prompt: str, **kwargs):
        nonlocal started
        started += 1
        if started == len(communities):
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 5)  # a parent waiting on a child would time out
        return json.dumps({"title": "T", "summary": "S", "rating": 5, "rating_explanation": "",
                           "findings": []})

    records, fresh = _run(communities, graph, llm, max_tokens=100_000)
    assert fresh == len(records) == len(communities) == started


def test_only_communities_with_a_description_in_flight_wait_for_the_summaries(tmp_path):
    """Reports of communities untouched by the summaries go out while those are in flight;
    a community holding a summarised node or edge is read only after they settle."""
    graph, communities = _make_graph(tmp_path)
    node = "N0"
    edge = next(tuple(sorted(e)) for c in communities.values() for e in c["edges"] if node not in e)
    touched = {cid for cid, c in communities.items()
               if node in c["nodes"] or (edge[0] in c["nodes"] and edge[1] in c["nodes"])}
    assert touched and len(touched) < len(communities)
    untouched_requested = asyncio.Event()
    requested: list[tuple[str, bool]] = []  # (community, summaries settled yet)
    settled = False

    class Summaries:
        summarising = frozenset({node, edge})

        async def settled(self):
            nonlocal settled
            if not settled:
                # A pipeline that held every report back for the summaries would time out here.
                await asyncio.wait_for(untouched_requested.wait(), 5)
                await graph.upsert_node(node, {**await graph.get_node(node), "description": "Summary of N0."})
                await graph.upsert_edge(*edge, {**await graph.get_edge(*edge), "description": "Summary of the edge."})
                settled = True

    async def llm(prompt: str, **kwargs):
        requested.append((_community_of(prompt, communities), settled))
        if len(requested) == len(communities) - len(touched):
            untouched_requested.set()
        await asyncio.sleep(0)
        return json.dumps({"title": "T", "summary": "S", "rating": 5, "rating_explanation": "", "findings": []})

    async def run():
        return await generate_community_reports(communities, graph=graph, llm=llm, tokenizer=TOKENIZER,
                                                max_tokens=100_000, existing={}, in_flight=Summaries())

    records, fresh = asyncio.run(run())
    assert fresh == len(communities)
    assert {cid for cid, after in requested if not after} == set(communities) - touched
    assert {cid for cid, after in requested if after} == touched
    nodes, edges = _graph_data(graph)
    for cid in touched:  # fingerprinted from the summaries, as a later run will see them
        assert records[cid]["fingerprint"] == community_fingerprint(communities[cid], nodes, edges)


def test_contexts_are_built_only_shortly_before_a_slot_can_take_them(tmp_path, monkeypatch):
    """At most 2 x max_async contexts exist ahead of their calls, not every community's at once."""
    import graphrag.operators.community_reports as reports

    graph, communities = _make_graph(tmp_path)
    assert len(communities) > 2
    built: list[str] = []
    real_tables = reports.community_tables
    monkeypatch.setattr(reports, "community_tables", lambda c, *a: built.append(c["title"]) or real_tables(c, *a))
    built_while_first_call_waited: list[int] = []

    class OneAtATime:
        max_async = 1

        async def __call__(self, prompt: str, **kwargs):
            await asyncio.sleep(0.02)
            built_while_first_call_waited.append(len(built))
            return json.dumps({"title": "T", "summary": "S", "rating": 5, "rating_explanation": "", "findings": []})

    records, fresh = _run(communities, graph, OneAtATime(), max_tokens=100_000)
    assert fresh == len(records) == len(communities) == len(built)
    assert built_while_first_call_waited[0] <= 2


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_depends_on_content_only():
    nodes = {"A": {"entity_type": "PERSON", "description": "a", "degree": 1},
             "B": {"entity_type": "ORG", "description": "b", "degree": 5}}
    edges = {("A", "B"): {"weight": 2.0, "description": "ab"}}
    c = {"level": 0, "title": "Cluster 1", "nodes": ["A", "B"], "edges": [["A", "B"]], "chunk_ids": ["x"],
         "occurrence": 1.0, "sub_communities": []}
    fp = community_fingerprint(c, nodes, edges)
    reordered = {**c, "title": "Cluster 9", "nodes": ["B", "A"], "edges": [["B", "A"]], "chunk_ids": ["y"]}
    assert community_fingerprint(reordered, {**nodes, "A": {**nodes["A"], "degree": 7}},
                                 {("B", "A"): edges[("A", "B")]}) == fp
    assert community_fingerprint({**c, "level": 1}, nodes, edges) != fp
    assert community_fingerprint(c, nodes, {("A", "B"): {"weight": 3.0, "description": "ab"}}) != fp
    assert community_fingerprint(c, {**nodes, "B": {**nodes["B"], "entity_type": "GEO"}}, edges) != fp
    assert community_fingerprint(c, {**nodes, "B": {**nodes["B"], "description": "b!"}}, edges) != fp


# --------------------------------------------------------------------------- parsing

_GOOD = {"title": "T", "summary": "S", "rating": 7.5, "rating_explanation": "E",
         "findings": [{"summary": "f", "explanation": "x"}]}


@pytest.mark.parametrize("text", [
    json.dumps(_GOOD),
    "```json\n" + json.dumps(_GOOD, indent=2) + "\n```",
    "```\n" + json.dumps(_GOOD) + "\n```",
    "Here is the report:\n" + json.dumps(_GOOD) + "\nHope it helps {really}.",
    '{"title": "T", "summary": "S", "rating": "7.5", "rating_explanation": "E",'
    ' "findings": [{"summary": "f", "explanation": "x",},],}',
    '{"title": "T", "summary": "S", "rating": "15/20", "rating_explanation": "E",'
    ' "findings": [{"insight": "f", "explanation": "x"}]}',
    "{'title': 'T', 'summary': 'S', 'rating': 7.5, 'rating_explanation': 'E',"
    " 'findings': [{'summary': 'f', 'explanation': 'x'}]}",
    json.dumps({"report": _GOOD}),
])
def test_parse_report_json_tolerates_mess(text):
    assert parse_report_json(text) == _GOOD


@pytest.mark.parametrize("rating, expected", [
    (8, 8.0), ("8/10", 8.0), ("7.5", 7.5), ("rating: 6 out of 10", 6.0), (42, 10.0), (-3, 0.0),
    ("high", 0.0), (None, 0.0), ("4/5", 8.0), ("7,5", 7.5),
])
def test_rating_coercion(rating, expected):
    report = parse_report_json(json.dumps({"title": "T", "rating": rating}))
    assert report is not None and report["rating"] == expected
    # A stored report (a nano-graphrag one may keep the model's text) is read by the same rule.
    assert stored_rating({"report_json": {"title": "T", "rating": rating}}) == expected


def test_stored_rating_of_a_record_without_a_report():
    assert stored_rating({}) == stored_rating({"report_json": "not a dict"}) == 0.0


def test_findings_normalised():
    report = parse_report_json(json.dumps({"title": "T", "findings": [
        "plain", {"insight": "i", "explanation": "e"}, {"summary": "s"}, {}, 3]}))
    assert report["findings"] == [
        {"summary": "plain", "explanation": ""}, {"summary": "i", "explanation": "e"},
        {"summary": "s", "explanation": ""}, {"summary": "3", "explanation": ""}]
    single = parse_report_json(json.dumps({"title": "T", "findings": {"summary": "only"}}))
    assert single["findings"] == [{"summary": "only", "explanation": ""}]
    assert parse_report_json('{"title": "T"}') == {
        "title": "T", "summary": "", "rating": 0.0, "rating_explanation": "", "findings": []}


@pytest.mark.parametrize("text", [
    "", "no json here", "[1, 2, 3]", '{"summary": "no title"}', '{"title": ""}', '{"title": ', None,
    '{"title": "T" "summary": }',
])
def test_parse_report_json_rejects(text):
    assert parse_report_json(text) is None


def test_braces_inside_strings_do_not_confuse_the_parser():
    text = 'Note {this}.\n```json\n{"title": "A {curly} title", "summary": "has } and {"}\n```'
    assert parse_report_json(text)["title"] == "A {curly} title"


# --------------------------------------------------------------------------- mock server


def test_realistic_mock_server_reports_parse(tmp_path, llm_server):
    graph, communities = _make_graph(tmp_path)
    client = LLMClient(openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k"),
                       model_id="gpt-4o-mini", max_async=4, usage=UsageCounter())
    records, fresh = _run(communities, graph, client)
    assert fresh == len(communities)
    assert llm_server.calls_by_kind["report"] == len(communities)
    for cid, rec in records.items():
        assert rec["report_source"] == "llm", cid
        assert "Community" in rec["title"]
        assert 0.0 <= rec["report_json"]["rating"] <= 10.0
        assert rec["report_json"]["findings"]
        top = max(communities[cid]["nodes"], key=lambda n: graph.graph.degree(n))
        assert top.title() in rec["report_json"]["summary"] or top in rec["report_json"]["summary"]
    assert client.usage.snapshot()["report"]["calls"] == len(communities)
    extractive = build_extractive_report(communities["0"], {}, {})
    assert extractive["title"]  # the fallback builder copes with no graph data at all


def test_work_kept_between_writes_lives_and_dies_with_its_owner() -> None:
    """``PerOwner`` (report digests per graph store, resolution's work per index_meta store):
    one object per owner, another owner's its own, gone once the owner is, and nothing kept
    for an owner that cannot be weakly referenced."""
    import gc

    from graphrag.kept import PerOwner

    class Store:
        pass

    kept: PerOwner[dict] = PerOwner(dict)
    first, second = Store(), Store()
    kept.get(first)["A"] = 1
    assert kept.get(first) == {"A": 1} and kept.get(second) == {}
    del first
    gc.collect()
    assert len(kept) == 1  # only the second owner's
    unreferenceable = 7
    kept.get(unreferenceable)["B"] = 2
    assert kept.get(unreferenceable) == {} and len(kept) == 1


# --------------------------------------------------------------------------- small components


# Components besides the karate club: a pair, a triangle, a star of four, a path of four
# (which Leiden cuts in two: neither half is its whole component) and a star of five.
_SMALL_COMPONENTS = {
    "pair": [("PA", "PB")],
    "triangle": [("TA", "TB"), ("TB", "TC"), ("TA", "TC")],
    "star4": [("RA", "RB"), ("RA", "RC"), ("RA", "RD")],
    "path": [("QA", "QB"), ("QB", "QC"), ("QC", "QD")],
    "star5": [("SA", "SB"), ("SA", "SC"), ("SA", "SD"), ("SA", "SE")],
}


def _graph_with_small_components(tmp_path):
    """The karate club (one large component) beside the small components above; each entity
    and relation has a description of its own, to find in its report."""
    graph, _ = _make_graph(tmp_path)

    async def build():
        for edges in _SMALL_COMPONENTS.values():
            for name in dict.fromkeys(n for e in edges for n in e):
                await graph.upsert_node(name, {"entity_type": '"PLACE"', "description": f"{name} is a harbour town.",
                                               "source_id": "chunk-9"})
            for a, b in edges:
                await graph.upsert_edge(a, b, {"weight": 1.0, "description": f"A ferry runs from {a} to {b}.",
                                               "source_id": "chunk-9"})
        await graph.clustering("leiden")
        return await graph.community_schema()

    return graph, asyncio.run(build())


def _component_community(communities, name: str) -> str:
    (cid,) = [cid for cid, c in communities.items() if name in c["nodes"]]
    return cid


def test_whole_small_components_are_reported_from_their_records_without_a_model(tmp_path):
    graph, communities = _graph_with_small_components(tmp_path)
    small = {_component_community(communities, edges[0][0]): kind
             for kind, edges in _SMALL_COMPONENTS.items() if kind in ("pair", "triangle", "star4")}
    star = _component_community(communities, "SA")
    # As small, but relations leave them: the path's halves, some communities in the karate club.
    halves = {_component_community(communities, n) for n in ("QA", "QD")}
    assert len(halves) == 2 and all(len(communities[c]["nodes"]) < 4 for c in halves)
    assert any(len(c["nodes"]) <= 4 and "N0" in c["nodes"] for c in communities.values())

    llm = FakeLLM()
    records, fresh = _run(communities, graph, llm, small_component_max_entities=4)
    called = {_community_of(p, communities) for p, _ in llm.calls}
    assert called == set(communities) - set(small) and len(llm.calls) == len(called)
    assert fresh == len(communities)
    for cid, kind in small.items():
        rec = records[cid]
        assert rec["report_source"] == "small_component"
        members, edges = communities[cid]["nodes"], _SMALL_COMPONENTS[kind]
        # Every relation is a finding, its description whole; the members' own text is in the summary.
        findings = {f["summary"]: f["explanation"] for f in rec["report_json"]["findings"]}
        assert len(findings) == len(edges)
        assert {f"A ferry runs from {a} to {b}." for a, b in edges} == set(findings.values())
        assert all(f"{n} is a harbour town." in rec["report_json"]["summary"] for n in members)
        assert rec["report_string"].startswith(f"# {rec['title']}")
    assert records[star]["report_source"] == "llm"

    # Reused as they are while unchanged: no call, the same records.
    llm = FakeLLM()
    again, fresh = _run(communities, graph, llm, existing=copy.deepcopy(records), small_component_max_entities=4)
    assert llm.calls == [] and fresh == 0 and again == records

    # A lower limit sends the components now over it to the model; the pair keeps its report.
    llm = FakeLLM()
    lower, fresh = _run(communities, graph, llm, existing=copy.deepcopy(records), small_component_max_entities=2)
    pair = _component_community(communities, "PA")
    assert {_community_of(p, communities) for p, _ in llm.calls} == set(small) - {pair} == {
        cid for cid, r in lower.items() if r != records[cid]}
    assert lower[pair] == records[pair]
    # 0: every community goes to the model, the LLM-free path reports as before.
    llm = FakeLLM()
    _run(communities, graph, llm, small_component_max_entities=0)
    assert len(llm.calls) == len(communities)
    offline, _ = _run(communities, graph, None, extractive=True, small_component_max_entities=4)
    assert {r["report_source"] for r in offline.values()} == {"extractive"}


def test_a_small_component_joined_to_a_larger_one_goes_to_the_model(tmp_path):
    graph, communities = _graph_with_small_components(tmp_path)
    records, _ = _run(communities, graph, FakeLLM(), small_component_max_entities=4)

    async def join():  # the pair's first entity now relates to the star's centre
        await graph.upsert_edge("PA", "SA", {"weight": 1.0, "description": "PA trades with SA.", "source_id": "c"})
        await graph.clustering("leiden")
        return await graph.community_schema()

    after = asyncio.run(join())
    llm = FakeLLM()
    second, _ = _run(after, graph, llm, existing=records, small_component_max_entities=4, touched={"PA", "SA"})
    pair = _component_community(after, "PA")
    # Its members and relation are as they were, but a relation now leaves it: the model reports it.
    assert after[pair]["nodes"] == ["PA", "PB"] and "SA" not in after[pair]["nodes"]
    assert [_community_of(p, after) for p, _ in llm.calls] == [pair]
    assert second[pair]["report_source"] == "llm"
    # Apart again, it has the report a write of the pair alone gives: its first, with no call.
    async def part():
        await graph.delete_edge("PA", "SA")
        await graph.clustering("leiden")
        return await graph.community_schema()

    apart = asyncio.run(part())
    llm = FakeLLM()
    third, _ = _run(apart, graph, llm, existing=second, small_component_max_entities=4, touched={"PA", "SA"})
    assert llm.calls == []
    assert third[_component_community(apart, "PA")]["report_json"] == records[_component_community(communities, "PA")]["report_json"]
    assert third[_component_community(apart, "PA")]["report_source"] == "small_component"
    # The other small components keep their reports, unread.
    for name in ("TA", "RA"):
        cid = _component_community(after, name)
        assert second[cid]["report_source"] == "small_component" and second[cid]["report_json"] == (
            records[_component_community(communities, name)]["report_json"])


def test_small_component_reports_are_not_tried_again_by_a_model():
    from graphrag.operators.community_index import index_after

    records = {"1": {"report_source": "small_component"}, "2": {"report_source": "extractive"},
               "3": {"report_source": "fallback"}, "4": {"report_source": "llm"}}
    assert index_after(None, {}, records, None).not_from_llm == {"2", "3"}


def test_a_raised_limit_reports_untouched_small_components_from_their_records(tmp_path):
    """A model's report of a whole component now within the limit is not taken unread (even
    with nothing touched): the rule is checked on the graph, so which report a community has
    depends on the graph and the limit, not on the writes that made it."""
    graph, communities = _graph_with_small_components(tmp_path)
    small = {_component_community(communities, edges[0][0])
             for kind, edges in _SMALL_COMPONENTS.items() if kind in ("pair", "triangle", "star4")}
    by_model, _ = _run(communities, graph, FakeLLM(), small_component_max_entities=0)
    assert {r["report_source"] for r in by_model.values()} == {"llm"}

    llm = FakeLLM()
    raised, fresh = _run(communities, graph, llm, existing=copy.deepcopy(by_model), small_component_max_entities=4,
                         touched=set())
    assert llm.calls == [] and fresh == len(small)
    assert {cid for cid, r in raised.items() if r["report_source"] == "small_component"} == small
    assert {cid: r for cid, r in raised.items() if cid not in small} == {
        cid: r for cid, r in by_model.items() if cid not in small}
    fresh_small, _ = _run(communities, graph, FakeLLM(), small_component_max_entities=4)
    assert {cid: raised[cid] for cid in small} == {cid: fresh_small[cid] for cid in small}
