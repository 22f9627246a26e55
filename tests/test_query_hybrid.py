"""Hybrid queries: passages ranked by a personalized PageRank over entities and chunks."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphrag import GraphRAG, QueryParam
from graphrag.embedding import hash_embedding
from graphrag.operators import query_hybrid, walk_graph
from graphrag.operators.query_hybrid import Ranking, fuse, link_entities, personalized_pagerank
from graphrag.operators.walk_graph import build_graph_index, graph_index
from graphrag.storage.base import KeepsWalkLinks

# The answer needs two hops: the question names Elspeth Marrowind; her passage names Quarvale;
# the passage about Quarvale (the answer, Tessaly) shares no word with the question, while
# each distractor shares a few.
QUESTION = "Which river flows past the town where Elspeth Marrowind was born?"
BRIDGE = "Elspeth Marrowind was born in Quarvale and wrote poems about its harbour."
ANSWER = "Tessaly, a slow green stream crossing meadows, curls around Quarvale."
DISTRACTORS = [
    "A river flows by the mill, turning its wheel through long wet autumn days and nights.",
    "That winter the town kept quiet while snow covered roofs, lanes, gardens and orchards.",
    "Barges carrying grain and timber pass under stone bridges near a river at every dawn.",
    "Nobody was ever seen near that lighthouse after storms wrecked its lamp and stairs.",
]


def _rag(tmp_path: Path, **options: Any) -> GraphRAG:
    rag = GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(256), extraction="nlp",
                   show_progress=False, **options)
    return rag


def _sources(context: str) -> list[str]:
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from retrieval_eval import context_passages

    return [p.strip() for p in context_passages("hybrid", context)]


def _naive_passages(context: str) -> list[str]:
    return [p.strip() for p in context.split("\n--New Chunk--\n")]


@pytest.fixture
def two_hop(tmp_path: Path) -> GraphRAG:
    rag = _rag(tmp_path)
    rag.insert([BRIDGE, ANSWER, *DISTRACTORS])
    return rag


def test_the_walk_finds_the_second_hop_that_vector_search_misses(two_hop: GraphRAG) -> None:
    hybrid = _sources(two_hop.query(QUESTION, QueryParam(mode="hybrid", only_need_context=True)))
    naive = _naive_passages(two_hop.query(QUESTION, QueryParam(mode="naive", only_need_context=True)))
    assert ANSWER in hybrid[:2] and BRIDGE in hybrid[:2]
    assert ANSWER not in naive[:2]


def test_the_hybrid_context_holds_the_linking_entities_and_relations(two_hop: GraphRAG) -> None:
    context = two_hop.query(QUESTION, QueryParam(mode="hybrid", only_need_context=True))
    entities = context.split("-----Relationships-----")[0]
    assert "ELSPETH MARROWIND" in entities and "QUARVALE" in entities
    assert "-----Sources-----" in context


def test_same_index_same_question_same_order(two_hop: GraphRAG, tmp_path: Path) -> None:
    param = QueryParam(mode="hybrid", only_need_context=True)
    first = two_hop.query(QUESTION, param)
    assert two_hop.query(QUESTION, param) == first
    walk_graph._indexes.clear()  # a rebuilt graph index ranks the same
    assert two_hop.query(QUESTION, param) == first
    assert _rag(tmp_path).query(QUESTION, param) == first  # another process, same files
    local = QueryParam(mode="local", only_need_context=True)
    assert two_hop.query(QUESTION, local) == _rag(tmp_path).query(QUESTION, local)


def test_the_graph_index_is_built_once_per_index_version(two_hop: GraphRAG) -> None:
    stores = two_hop.stores
    first = asyncio.run(graph_index(stores))
    two_hop.query(QUESTION, QueryParam(mode="hybrid", only_need_context=True))
    assert asyncio.run(graph_index(two_hop.stores)) is first  # queries reuse it
    two_hop.insert("Tessaly runs into the Brennor estuary below Quarvale.")
    rebuilt = asyncio.run(graph_index(two_hop.stores))
    assert rebuilt is not first and "BRENNOR" in " ".join(rebuilt.entities)


def test_a_walk_is_kept_per_index_version_and_an_insert_or_delete_walks_the_new_graph(
        two_hop: GraphRAG, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A question asked again reuses its walk (the same restart over the same matrices gives
    the same scores); a write builds a new index, whose walks are made over the new graph:
    each context equals one from a newly opened instance, which has kept nothing."""
    walks: list[int] = []

    def counted(transition_t: Any, restart: np.ndarray) -> np.ndarray:
        walks.append(transition_t.shape[0])
        return personalized_pagerank(transition_t, restart)

    monkeypatch.setattr(query_hybrid, "personalized_pagerank", counted)
    hybrid, local = (QueryParam(mode=m, only_need_context=True) for m in ("hybrid", "local"))
    first = two_hop.query(QUESTION, hybrid)
    assert len(walks) == 1
    assert two_hop.query(QUESTION, hybrid) == first and two_hop.query(QUESTION, local)
    assert len(walks) == 1  # asked again, and by local mode with the same seeds: kept
    before = asyncio.run(graph_index(two_hop.stores))
    two_hop.insert("Tessaly runs into the Brennor estuary below Quarvale, past Elspeth Marrowind's house.")
    inserted = two_hop.query(QUESTION, hybrid)
    assert len(walks) == 2 and walks[-1] > walks[0]  # walked again, over the larger graph
    assert asyncio.run(graph_index(two_hop.stores)) is not before
    assert inserted == _rag(tmp_path).query(QUESTION, hybrid) and "Brennor" in inserted
    assert two_hop.query(QUESTION, local) == _rag(tmp_path).query(QUESTION, local)
    doc_id = next(iter(asyncio.run(two_hop.stores.full_docs.all_keys())))
    two_hop.delete_documents(doc_id)
    deleted = two_hop.query(QUESTION, hybrid)
    assert len(walks) >= 3 and deleted == _rag(tmp_path).query(QUESTION, hybrid)


def test_kept_walks_are_the_walks_read_only_and_as_many_as_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    index = build_graph_index([("A", "c1<SEP>c2"), ("B", "c2<SEP>c3")], [("A", "B")])
    size = len(index.entities) + len(index.chunks)
    calls: list[bytes] = []

    def counted(transition_t: Any, restart: np.ndarray) -> np.ndarray:
        calls.append(restart.tobytes())
        return personalized_pagerank(transition_t, restart)

    monkeypatch.setattr(walk_graph, "WALKS_KEPT", 2)
    restarts = [np.eye(size)[i] for i in range(3)]
    kept = index.walk(restarts[0], counted)
    assert np.array_equal(kept, personalized_pagerank(index.transition_t, restarts[0]))
    with pytest.raises(ValueError):
        kept[0] = 0.0  # shared by every caller
    assert index.walk(restarts[0].copy(), counted) is kept and len(calls) == 1
    nearly = (restarts[0] + restarts[1]) / 2  # another restart: walked
    assert not np.array_equal(index.walk(nearly, counted), kept) and len(calls) == 2
    index.walk(restarts[1], counted)  # the third restart: the least recently used one goes
    assert index.walk(nearly, counted) is not None and len(calls) == 3
    index.walk(restarts[0], counted)
    assert len(calls) == 4


def test_a_walk_under_other_settings_is_never_answered_from_a_kept_one(
        two_hop: GraphRAG, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk's own settings (damping, steps, tolerance) are part of what a kept walk is kept
    under: an evaluation that changes them between questions over one index gets the walk those
    settings give, as a newly opened instance would."""
    walks: list[np.ndarray] = []

    def counted(transition_t: Any, restart: np.ndarray) -> np.ndarray:
        walks.append(personalized_pagerank(transition_t, restart))
        return walks[-1]

    monkeypatch.setattr(query_hybrid, "personalized_pagerank", counted)
    hybrid = QueryParam(mode="hybrid", only_need_context=True)
    two_hop.query(QUESTION, hybrid)
    two_hop.query(QUESTION, hybrid)
    assert len(walks) == 1
    monkeypatch.setattr(query_hybrid, "DAMPING", 0.2)
    damped = two_hop.query(QUESTION, hybrid)
    assert len(walks) == 2 and not np.array_equal(walks[0], walks[1])  # walked again, not the kept one
    assert damped == _rag(tmp_path).query(QUESTION, hybrid)


def test_local_sources_follow_the_walk(two_hop: GraphRAG) -> None:
    """Local mode keeps its own Sources (the retrieved entities' chunks), ordered by the walk."""
    local = _sources(two_hop.query(QUESTION, QueryParam(mode="local", only_need_context=True)))
    walk = _sources(two_hop.query(QUESTION, QueryParam(mode="hybrid", only_need_context=True)))
    assert local and local == [s for s in walk if s in local]


def test_hybrid_needs_chunk_vectors(tmp_path: Path) -> None:
    rag = _rag(tmp_path, enable_naive_rag=False)
    rag.insert([BRIDGE, ANSWER])
    assert rag.query(QUESTION, QueryParam(mode="hybrid", only_need_context=True)) == query_hybrid.HYBRID_NEEDS_VECTORS


def _index(*names: str) -> Any:
    return build_graph_index([(n, f"chunk-{i}") for i, n in enumerate(names)], [])


def test_question_names_link_exactly_loosely_and_fuzzily() -> None:
    index = _index("ELSPETH MARROWIND", "THE QUARVALE GUILD", "TESSALY", "RIVER")
    linked = {index.entities[i]: s for i, s in link_entities(
        "Did Elspeth Marowind meet the Quarvale Guild's members on the tessaly, a river?", index).items()}
    assert linked["TESSALY"] == 1.0  # exact after the engine's normalisation (case)
    assert linked["THE QUARVALE GUILD"] == 0.9  # loose: no article, no possessive
    assert 0.88 <= linked["ELSPETH MARROWIND"] < 1.0  # fuzzy: a misspelt name
    assert linked["RIVER"] == 1.0


def test_fuzzy_names_are_difflibs_three_checks() -> None:
    """The length bound taken before a matcher call keeps exactly the names difflib's
    ``real_quick_ratio``, ``quick_ratio`` and ``ratio`` checks keep, near the cutoff too."""
    import difflib
    import random

    rnd = random.Random(4)
    stems = ["marrow", "quarvale", "tessaly", "elspeth", "harbour"]

    def name() -> str:
        word = rnd.choice(stems)
        for _ in range(rnd.randint(0, 3)):  # misspell: drop, double or change a letter
            at = rnd.randrange(len(word))
            word = rnd.choice([word[:at] + word[at + 1:], word[:at] + word[at] + word[at:],
                               word[:at] + rnd.choice("aeiouy") + word[at + 1:]])
        return " ".join([word] + rnd.sample(stems, rnd.randint(0, 2)))

    index = _index(*{name().upper() for _ in range(400)})
    for _ in range(60):
        key = query_hybrid.loose_name(name())
        candidates = sorted({i for w in key.split() for i in index.by_word.get(w, ())[:200]})
        expected = {}
        for i in candidates:
            m = difflib.SequenceMatcher(a=index.loose_names[i], b=key, autojunk=False)
            if min(m.real_quick_ratio(), m.quick_ratio(), m.ratio()) >= query_hybrid.FUZZY_CUTOFF:
                expected[i] = m.ratio()
        assert query_hybrid._fuzzy(key, index) == expected


def test_a_longer_name_wins_over_the_names_inside_it() -> None:
    index = _index("QUARVALE", "QUARVALE HARBOUR")
    linked = link_entities("Who runs Quarvale Harbour?", index)
    assert [index.entities[i] for i in linked] == ["QUARVALE HARBOUR"]


def test_rare_entities_seed_more_than_hubs() -> None:
    nodes = [("HUB", "<SEP>".join(f"c{i}" for i in range(10))), ("RARE", "c0")]
    index = build_graph_index(nodes, [("HUB", "RARE")])
    assert index.specificity.tolist() == [0.1, 1.0]


def test_personalized_pagerank_is_a_distribution_that_favours_the_seeds() -> None:
    index = build_graph_index([("A", "c1<SEP>c2"), ("B", "c2<SEP>c3")], [("A", "B")])
    restart = np.zeros(len(index.entities) + len(index.chunks) + 1)  # one unlinked chunk too
    restart[0] = 1.0
    scores = personalized_pagerank(index.transition_t, restart)
    assert scores.sum() == pytest.approx(1.0)
    assert scores[0] == scores.max() and scores[-1] == 0.0
    c1, c3 = (index.chunk_offset + index.chunk_position(c) for c in ("c1", "c3"))
    assert scores[c1] > scores[c3]  # one hop from the seed beats two


def test_personalized_pagerank_adds_the_restart_at_the_seeds_with_the_same_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding the restart's terms at its seeds only gives every score the bits that adding the
    whole arrays gives (the power iteration written out in full here), seeds past the linked
    nodes (unlinked chunks) and a walk stopped by the step limit included."""
    rnd = np.random.default_rng(5)
    for trial in range(40):
        names = [f"E{i}" for i in range(rnd.integers(5, 60))]
        nodes = [(n, "<SEP>".join(f"c{j}" for j in rnd.choice(40, rnd.integers(1, 4), replace=False)))
                 for n in names]
        edges = [(names[a], names[b]) for a, b in rnd.integers(0, len(names), (len(names), 2)) if a != b]
        index = build_graph_index(nodes, edges)
        restart = np.zeros(len(index.entities) + len(index.chunks) + trial % 3)  # unlinked chunks
        seeds = rnd.choice(len(restart), int(rnd.integers(1, 6)), replace=False)
        restart[seeds] = rnd.random(len(seeds))
        restart[-1] += trial % 3  # a seed among the unlinked chunks where there are some
        restart /= restart.sum()
        t, d = index.transition_t, query_hybrid.DAMPING
        scores = restart.copy()
        for _ in range(query_hybrid.ITERATIONS if trial % 2 else 3):
            updated = (1.0 - d) * restart
            updated[:t.shape[0]] += d * (t @ scores[:t.shape[0]])
            updated += restart * (1.0 - updated.sum())
            done = np.abs(updated - scores).sum() < query_hybrid.TOLERANCE
            scores = updated
            if done:
                break
        with monkeypatch.context() as patch:
            if trial % 2 == 0:  # three steps only: the walk's own limit, lowered
                patch.setattr(query_hybrid, "ITERATIONS", 3)
            assert personalized_pagerank(t, restart).tobytes() == scores.tobytes()


def test_fusion_ranks_what_both_orders_rank_well_first() -> None:
    walk = ["bridge", "seed", "hub"]
    dense = ["seed", "look-alike", "bridge"]
    # seed: 1/61 + 1/60; bridge: 1/60 + 1/62; look-alike: 1/61 (dense only); hub: 1/62 (walk only)
    assert fuse([walk, dense]) == ["seed", "bridge", "look-alike", "hub"]
    assert fuse([walk, dense], k=1) == ["seed", "bridge", "look-alike", "hub"]
    assert fuse([["a", "b"], ["b", "a"]]) == ["a", "b"]  # a tie keeps the first ranking's order
    assert fuse([["a"], []]) == ["a"] and fuse([[], []]) == []


class _Graph(KeepsWalkLinks):
    def __init__(self, nodes: list, edges: list) -> None:
        self.nodes, self.edges = nodes, edges

    async def get_walk_links(self) -> tuple[list, list]:
        return self.nodes, self.edges

    async def change_token(self) -> None:
        return None  # as a file store: the view changes on reload only


class _Vectors:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def query(self, question: str, top_k: int) -> list[dict]:
        return [{"id": c, "distance": 1.0 - i / 10} for i, c in enumerate(self.order[:top_k])]


class _Stores:
    version = 1
    relations_vdb = None  # an index without relation vectors (the default)
    lexical_index = None  # the lexical channel switched off

    def __init__(self, nodes: list, edges: list, dense: list[str]) -> None:
        self.graph, self.chunks_vdb = _Graph(nodes, edges), _Vectors(dense)


def test_the_walk_counts_visits_per_link_so_a_crowded_chunk_does_not_win_by_its_size() -> None:
    """Both chunks name the question's entity; the "list" chunk also names twelve others that
    send the walk back to it, so it is visited more, but per link the chunk about the entity
    ranks first."""
    others = [(f"OTHER {i}", "list") for i in range(12)]
    nodes = [("QUARVALE", "about<SEP>list"), ("TESSALY", "about"), *others]
    index = build_graph_index(nodes, [])
    restart = np.zeros(len(index.entities) + len(index.chunks))
    restart[index.entities.index("QUARVALE")] = 1.0
    visits = personalized_pagerank(index.transition_t, restart)
    about, crowded = (index.chunk_offset + index.chunk_position(c) for c in ("about", "list"))
    assert visits[crowded] > visits[about]
    ranking = asyncio.run(query_hybrid.rank("Where is Quarvale?", _Stores(nodes, [], dense=[]), QueryParam()))
    assert ranking is not None and ranking.chunk_ids == ["about", "list"]


def test_the_most_similar_chunk_and_the_walk_are_fused() -> None:
    """The chunk most like the question seeds the walk; a chunk one shared name away from it
    (the second hop) ranks above a look-alike the walk never reaches. As in a real graph, the
    walk reaches more than these: ten chunks share a common name with the bridge."""
    common = "<SEP>".join(["bridge"] + [f"filler-{i}" for i in range(10)])
    nodes = [("ELSPETH", "bridge"), ("QUARVALE", "bridge<SEP>answer"), ("TESSALY", "answer"), ("MILL", "look-alike"),
             ("HARBOUR", common)]
    stores = _Stores(nodes, [], dense=["bridge", "look-alike", "other", "answer"])
    ranking = asyncio.run(query_hybrid.rank("which river flows past her town?", stores, QueryParam(top_k=4)))
    assert ranking is not None and ranking.chunk_ids[:2] == ["bridge", "answer"] and "look-alike" in ranking.chunk_ids


def test_a_second_hop_only_the_walk_reaches_ranks_by_where_the_walk_has_it() -> None:
    """The vector search lists its 20 best chunks: the seed, 18 look-alikes and the bridge.
    The walk has the seed, the bridge and then the answer, which the vector search does not
    list; it reaches the look-alikes only after 40 other chunks. Counted as standing just
    past the vector order's end, the answer comes right after the seed and the bridge;
    given nothing by that order (plain fusion), it falls below every look-alike."""
    looks = [f"look-{i}" for i in range(18)]
    dense = ["seed", *looks, "bridge"]
    walk = ["seed", "bridge", "answer", *[f"walked-{i}" for i in range(40)], *looks]
    assert fuse([walk, dense], absent_at_end=True)[:3] == ["seed", "bridge", "answer"]
    plain = fuse([walk, dense])
    assert plain[:2] == ["seed", "bridge"] and plain.index("answer") > max(plain.index(x) for x in looks)
    # Each order counts past its own end: a look-alike the walk misses scores as if at the
    # walk's end, the answer as if at the vector order's end.
    assert fuse([["answer", "seed"], ["seed", "look"]], absent_at_end=True) == ["seed", "answer", "look"]
    # An empty order (a channel that is off) moves nothing.
    assert fuse([walk, dense, []], absent_at_end=True) == fuse([walk, dense], absent_at_end=True)
    assert fuse([["a", "b"], []], absent_at_end=True) == ["a", "b"] and fuse([[], []], absent_at_end=True) == []


def test_hybrid_ranks_the_stranded_second_hop_under_the_default_fusion(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through :func:`rank` with the shipped constants: the answer, which the vector search does
    not list, ranks right after the bridge, above the three look-alikes it lists and the
    walk reaches only through a common name; with ``ABSENT_AT_END`` off it falls below them."""
    looks = [f"look-{i}" for i in range(3)]
    nodes = [("ELSPETH", "bridge"), ("QUARVALE", "bridge<SEP>answer"), ("TESSALY", "answer"),
             ("HARBOUR", "<SEP>".join(["bridge", *[f"filler-{i}" for i in range(10)]])),
             ("MILL", "<SEP>".join(["filler-0", *looks]))]
    stores = _Stores(nodes, [], dense=["bridge", *looks])
    param = QueryParam(top_k=4)
    ranking = asyncio.run(query_hybrid.rank("which river flows past her town?", stores, param))
    assert ranking is not None and ranking.chunk_ids[:2] == ["bridge", "answer"]
    monkeypatch.setattr(query_hybrid, "ABSENT_AT_END", False)
    plain = asyncio.run(query_hybrid.rank("which river flows past her town?", stores, param))
    assert plain is not None and plain.chunk_ids.index("answer") > max(plain.chunk_ids.index(x) for x in looks)


def test_the_best_entities_are_the_head_of_the_whole_order() -> None:
    """A ranking orders only the entities that can be among the ``n`` best, and gives what
    sorting every reached entity by score (ties by position) gives, ties at the cut included."""
    rnd = np.random.default_rng(3)
    visits = rnd.choice([0.0, 0.1, 0.2, 0.25, 0.5], size=200) * rnd.choice([1.0, 1.0, 0.5], size=200)
    names = [f"E{i:03d}" for i in range(len(visits))]
    ranking = Ranking(chunk_ids=[], named=[], entity_names=names, entity_visits=visits)
    whole = sorted((i for i in range(len(visits)) if visits[i] > 0), key=lambda i: (-visits[i], i))
    expected = {names[i]: float(visits[i]) for i in whole}
    assert ranking.entity_scores == expected and list(ranking.entity_scores) == list(expected)
    for n in (0, 1, 2, 7, 40, len(whole) - 1, len(whole), len(whole) + 5):
        assert list(ranking.best_entities(n).items()) == list(expected.items())[:n]
