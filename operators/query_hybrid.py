"""Hybrid queries: passages ranked by a personalized PageRank over entities and chunks,
fused with the plain vector ranking.

Vector search finds the passage that reads like the question; a multi-hop question also
needs the passage that only shares an entity with it. So the walk runs over one graph of
entities and chunks (an entity is linked to the chunks that mention it and to the entities
it has relations with) and restarts, half and half, at

* the entities the question names (found by name: exact, normalised or fuzzy), each weighted
  by its specificity, ``1 / chunks mentioning it``, so a rare name counts more than a hub like
  a country's name; and
* the chunk most similar to the question.

The walk ranks chunks by visit probability per link (a walk visits a well-linked node
often whatever the seeds): what is connected to the question. The vector search ranks what
reads like it. Neither alone does better on multi-hop questions (seeded with every similar
chunk, the walk keeps its second hop below them; seeded with one, it misses them), so
passages rank by reciprocal-rank fusion of the two orders. A passage missing from one order
(mostly from the vector search's ``top_k``) counts as standing just past its end, where it at
best is: the second hop only the walk reaches then ranks by where the walk has it, not below
every passage the vector search listed. The graph's matrices are built
once per index version (:func:`walk_graph.graph_index`) and reused by every query until the next
commit.

The context holds the ranked passages (Sources) and the entities and relations that
linked them, packed under the local mode's budgets.
"""
from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

import numpy as np

from graphrag.query_param import QueryParam
from graphrag.records import Chunk, Entity, Relation, Retrieval
from graphrag.schema import edge_key

from .chinese_text import join_words, split_words
from .extraction import normalize_entity_name
from .fact_seeds import fact_seed
from .lexical import dense_for_fusion, lexical_ranking
from .nlp_extraction import STOPWORDS
from .positions import cited_content
from .rerank import rerank_chunks
from .query_context import answer_from_context, doubling_slices, pack_csv_section, pack_while_reading
from .tokenizer import Tokenizer
from .walk_graph import GraphIndex, graph_index, loose_name

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from graphrag.stores import Stores

    from .extraction import LLMCall

logger = logging.getLogger(__name__)

ENTITY_HEADER = ["id", "entity", "type", "description", "score"]
RELATION_HEADER = ["id", "source", "target", "description", "weight"]
SOURCE_HEADER = ["id", "content"]

HYBRID_NEEDS_VECTORS = "Hybrid queries need the chunk vector store: build the index with enable_naive_rag=True."

# HippoRAG's restart probability: half of each step goes back to the seeds, which keeps the
# walk within about two hops of what the question names.
DAMPING = 0.5
ITERATIONS = 40
TOLERANCE = 1e-8
# Share of the restart mass given to the question's entities; the rest goes to the chunk
# most similar to the question (the rest of the vector ranking enters through the fusion).
# Entities found by vector similarity are left out: on HotpotQA they moved recall by under
# 2 points either way and cost a second embedding of the question.
ENTITY_SEED_SHARE = 0.5
# Reciprocal-rank fusion's constant (Cormack et al., 2009): a passage scores
# 1 / (RRF_K + rank) in each order it is in; 60 is the usual value, not tuned here.
RRF_K = 60
# How the fusion scores an id missing from one of the orders (the vector search lists only
# ``top_k`` chunks; the walk reaches most of the graph): True, as if it stood just past that
# order's end; False, nothing from that order (plain reciprocal-rank fusion, which left a
# second hop only the walk reaches below every chunk both orders list). Compared in
# benchmarks/README.md, "Round 5 (issue 35)".
ABSENT_AT_END = True
# Share of the restart mass given to the facts nearest the question (operators/fact_seeds.py),
# when the index keeps relation vectors (``enable_relation_vectors``); the rest is split
# between entities and the chunk as above. And how many facts are read.
FACT_SEED_SHARE = 0.05
FACT_TOP_K = 5
MAX_SPAN_WORDS = 6
FUZZY_CUTOFF = 0.88

_WORD = re.compile(r"[^\W_]+(?:['’.&-][^\W_]+)*")


# --------------------------------------------------------------------------- entity linking


def question_spans(question: str) -> list[tuple[int, int, str]]:
    """Every run of up to ``MAX_SPAN_WORDS`` words that neither starts nor ends with a
    stopword, longest first: the names and noun phrases a question can mention."""
    words = split_words(_WORD.findall(question))
    spans = []
    for length in range(min(MAX_SPAN_WORDS, len(words)), 0, -1):
        for start in range(len(words) - length + 1):
            first, last = words[start].lower(), words[start + length - 1].lower()
            if first in STOPWORDS or last in STOPWORDS:
                continue
            spans.append((start, start + length, join_words(words[start:start + length])))
    return spans


def link_entities(question: str, index: GraphIndex) -> dict[int, float]:
    """Entities the question names, with a match strength in (0, 1]: exact 1, loose 0.9,
    fuzzy its similarity. Longer spans win: words a match covers are not matched again."""
    covered: set[int] = set()
    found: dict[int, float] = {}
    for start, end, text in question_spans(question):
        if covered.intersection(range(start, end)):
            continue
        hits: dict[int, float] = {i: 1.0 for i in index.exact.get(normalize_entity_name(text), [])}
        key = loose_name(text)
        if not hits and key:
            hits = {i: 0.9 for i in index.loose.get(key, [])}
        if not hits and len(key) >= 5 and text[:1].isupper():  # fuzzy for names only: it costs most
            hits = _fuzzy(key, index)
        if hits:
            covered.update(range(start, end))
            for i, strength in hits.items():
                found[i] = max(found.get(i, 0.0), strength)
    return found


def _fuzzy(key: str, index: GraphIndex) -> dict[int, float]:
    """Names close in spelling to ``key`` among those sharing one of its words."""
    candidates: set[int] = set()
    for word in key.split():
        candidates.update(index.by_word.get(word, ())[:200])  # a word in hundreds of names is no clue
    matcher = difflib.SequenceMatcher(b=key, autojunk=False)
    hits = {}
    names, size = index.loose_names, len(key)
    for i in sorted(candidates):
        # ``real_quick_ratio``'s bound from the lengths alone, as difflib computes it, first:
        # most candidates differ too much in length, and a matcher call costs more.
        if 2.0 * min(len(names[i]), size) / (len(names[i]) + size) < FUZZY_CUTOFF:
            continue
        matcher.set_seq1(names[i])
        if matcher.quick_ratio() >= FUZZY_CUTOFF and matcher.ratio() >= FUZZY_CUTOFF:
            hits[i] = matcher.ratio()
    return hits


# --------------------------------------------------------------------------- the walk


def personalized_pagerank(transition_t: "csr_matrix", restart: np.ndarray) -> np.ndarray:
    """Visit probabilities of a walk that follows a link with probability ``DAMPING`` and
    otherwise jumps back to ``restart`` (a distribution). Power iteration: deterministic."""
    linked = transition_t.shape[0]  # nodes past it (unlinked chunks) have no links
    jump = (1.0 - DAMPING) * restart
    scores, updated, change = restart.copy(), np.empty_like(restart), np.empty_like(restart)
    # A step is ``jump + DAMPING * followed``, plus ``restart`` times the mass that went
    # nowhere. ``restart`` is zero but at the few seeds, and adding zero changes no bits, so
    # both terms are added at the seeds only: every score is what adding the whole arrays
    # gives, in the same order of operations, at a few passes over the ~9,000 nodes fewer.
    # Each step writes into kept arrays rather than allocating new ones.
    seeds = np.flatnonzero(restart)
    linked_seeds = seeds[seeds < linked]
    for _ in range(ITERATIONS):
        np.multiply(transition_t @ scores[:linked], DAMPING, out=updated[:linked])
        updated[linked:] = jump[linked:]
        updated[linked_seeds] = jump[linked_seeds] + updated[linked_seeds]
        # Mass at a node without links (a chunk no entity mentions) goes back to the seeds.
        updated[seeds] += restart[seeds] * (1.0 - updated.sum())
        np.subtract(updated, scores, out=change)
        np.abs(change, out=change)
        if change.sum() < TOLERANCE:
            return updated
        scores, updated = updated, scores
    return scores


@dataclass
class Ranking:
    chunk_ids: list[str]  # every chunk the walk reached or the vector search found, best first
    named: list[str]  # the entities the question names (link_entities), strongest match first
    entity_names: list[str]  # the walk's graph's entities, by position (GraphIndex.entities)
    entity_visits: np.ndarray  # the walk's score per entity position

    def best_entities(self, n: Optional[int] = None) -> dict[str, float]:
        """The ``n`` best-reached entities (all with None) and their scores, best first, ties by
        position. Ordered and named on demand: a walk reaches most of the graph, and a query
        reads a few dozen, so only those scoring at least the ``n``-th best are sorted."""
        visits = self.entity_visits
        reached = np.flatnonzero(visits > 0)
        if n is not None and 0 < n < len(reached):
            nth_best = np.partition(visits[reached], len(reached) - n)[len(reached) - n]
            reached = reached[visits[reached] >= nth_best]
        order = reached[np.lexsort((reached, -visits[reached]))][:n]
        names = self.entity_names
        return dict(zip([names[i] for i in order.tolist()], visits[order].tolist()))

    @property
    def entity_scores(self) -> dict[str, float]:
        """Every reached entity, best first."""
        return self.best_entities()


@lru_cache(maxsize=16)
def _rank_weights(k: int, n: int) -> tuple[float, ...]:
    """``1 / (k + rank)`` for ranks 0 to ``n - 1``, kept: asked for powers of two, a few sizes serve
    every ranking."""
    return tuple([1.0 / (k + position) for position in range(n)])


def fuse(rankings: list[list[str]], k: int = RRF_K, absent_at_end: bool = False) -> list[str]:
    """Reciprocal-rank fusion: every id scores ``1 / (k + rank)`` in each ranking it is in
    (rank from 0); best first, ties in the order of first appearance across the rankings.
    ``absent_at_end``: an id missing from a non-empty ranking scores there as if at rank
    ``len(ranking)``, just past its end (an empty ranking, a channel that is off, counts for
    nobody)."""
    scores: dict[str, float] = {}
    get = scores.get
    for ranking in rankings:
        # Every id gets the end's weight from every ranking it is not in; adding that weight to
        # all ids changes no order, so an id in the ranking gains its weight less the end's.
        past_end = 1.0 / (k + len(ranking)) if absent_at_end else 0.0
        for item, weight in zip(ranking, _rank_weights(k, 1 << len(ranking).bit_length())):
            scores[item] = get(item, 0.0) + (weight - past_end)
    # ``scores`` holds the ids in order of first appearance, which a stable sort keeps for ties.
    return sorted(scores, key=scores.__getitem__, reverse=True)


async def rank(question: str, stores: Stores, param: QueryParam) -> Optional[Ranking]:
    """Chunks by the fusion of the ``top_k`` chunks most similar to the question, the lexical
    channel's ``top_k`` and the personalized PageRank from the entities the question names
    and the best chunk of each of those two; entities by the walk. None when nothing seeds
    the walk."""
    index = await graph_index(stores)
    dense: list[str] = []
    if stores.chunks_vdb is not None:
        dense = [h["id"] for h in await stores.chunks_vdb.query(question, top_k=param.top_k)]
    # The lexical channel's BM25 ranking is the third order fused (none when it is off), and
    # its best chunk seeds the walk beside the most similar one.
    lexical = await lexical_ranking(question, stores, param.top_k)
    best = list(dict.fromkeys(r[0] for r in (dense, lexical) if r))
    unlinked = sorted({c for c in dense + best if index.chunk_position(c) is None})
    chunks = index.chunks + unlinked
    size = len(index.entities) + len(chunks)
    entity_seed = np.zeros(size)
    linked = link_entities(question, index)
    for i, strength in linked.items():
        entity_seed[i] = strength * index.specificity[i]
    chunk_seed = np.zeros(size)
    for chunk_id in best:
        at = index.chunk_position(chunk_id)
        at = len(index.chunks) + unlinked.index(chunk_id) if at is None else at
        chunk_seed[index.chunk_offset + at] = 1.0
    facts = np.zeros(size)
    if FACT_SEED_SHARE > 0 and stores.relations_vdb is not None:
        for i, weight in (await fact_seed(question, stores.relations_vdb, index, FACT_TOP_K)).items():
            facts[i] = weight
    restart = np.zeros(size)
    rest = 1.0 - FACT_SEED_SHARE
    for seed, share in ((entity_seed, rest * ENTITY_SEED_SHARE), (chunk_seed, rest * (1.0 - ENTITY_SEED_SHARE)),
                        (facts, FACT_SEED_SHARE)):
        if seed.sum() > 0:
            restart += share * seed / seed.sum()
    if restart.sum() <= 0:
        return None
    restart /= restart.sum()
    scores = index.walk(restart, personalized_pagerank, (DAMPING, ITERATIONS, TOLERANCE))
    offset = index.chunk_offset
    # A walk visits a node in proportion to its links as well as to its closeness to the
    # seeds: per link, a chunk naming many entities is not that many times as relevant.
    degree = np.concatenate([index.degree[offset:], np.ones(len(unlinked))])
    chunk_scores = scores[offset:] / degree
    order = np.lexsort((np.arange(len(chunk_scores)), -chunk_scores))  # ties: by id
    walked = list(map(chunks.__getitem__, order[chunk_scores[order] > 0].tolist()))
    fused = fuse([walked, dense_for_fusion(question, dense, lexical, stores.chunks_vdb), lexical],
                 absent_at_end=ABSENT_AT_END)
    return Ranking(chunk_ids=fused, named=named_in_order(linked, index),
                   entity_names=index.entities, entity_visits=scores[:offset])


def named_in_order(linked: dict[int, float], index: GraphIndex) -> list[str]:
    """The names of :func:`link_entities`' entities, strongest match first (ties by position)."""
    return [index.entities[i] for i in sorted(linked, key=lambda i: (-linked[i], i))]


# --------------------------------------------------------------------------- the context


async def retrieve_hybrid(question: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer,
                          cited: bool = False) -> Optional[Retrieval]:
    """Entities (the best-visited, at most ``top_k``), the relations among them, then the
    passages the walk and the vector search reached, in their fused order, as far as the
    budgets hold; None when nothing matches. ``cited``: the Sources rows are numbered from
    1, the numbers a cited answer uses."""
    if stores.chunks_vdb is None:
        return None
    ranking = await rank(question, stores, param)
    if ranking is None or not ranking.chunk_ids:
        return None
    entity_scores = ranking.best_entities(param.top_k)
    names = list(entity_scores)
    found = [(n, d) for n, d in zip(names, await stores.graph.get_nodes_batch(names)) if d]
    entity_rows = [[i, n, d.get("entity_type", "UNKNOWN"), d.get("description", "UNKNOWN"),
                    f"{entity_scores[n]:.4g}"] for i, (n, d) in enumerate(found)]
    entity_budget = param.local_max_token_for_local_context // 2
    entities_text, n_entities, entities_tokens = pack_csv_section(
        "Entities", ENTITY_HEADER, entity_rows, entity_budget, tokenizer, cut_column=3)
    chosen = set(names)
    pairs = sorted({edge_key(*e) for edges in await stores.graph.get_nodes_edges_batch(names)
                    for e in edges if e[0] in chosen and e[1] in chosen})
    edges = [(pair, d or {}) for pair, d in zip(pairs, await stores.graph.get_edges_batch(pairs))]
    relation_rows = [[i, a, b, d.get("description", "UNKNOWN"), d.get("weight", 1.0)]
                     for i, ((a, b), d) in enumerate(edges)]
    relation_budget = param.local_max_token_for_local_context - entities_tokens
    relations_text, n_relations, _ = pack_csv_section("Relationships", RELATION_HEADER, relation_rows, relation_budget,
                                                   tokenizer, cut_column=3)

    async def read_chunks(ids: list[str]) -> list[tuple[Chunk, list[str]]]:
        return [(Chunk.from_stored(i, r), [cited_content(r)]) for i, r in zip(ids, await stores.text_chunks.get_by_ids(ids))
                if r is not None and r.get("content")]

    chunk_ids = await rerank_chunks(question, ranking.chunk_ids, stores, headings_first=param.named_headings_first)
    sources_text, chunks = await pack_while_reading(
        "Sources", SOURCE_HEADER, doubling_slices(chunk_ids), read_chunks, param.local_max_token_for_text_unit,
        tokenizer, first_id=1 if cited else 0)
    return Retrieval(
        question=question, mode="hybrid", chunks=tuple(chunks),
        context="\n\n".join(s for s in (entities_text, relations_text, sources_text) if s),
        entities=tuple(replace(Entity.from_stored(n, d), score=entity_scores[n]) for n, d in found[:n_entities]),
        relations=tuple(Relation.from_stored(a, b, d) for (a, b), d in edges[:n_relations]))


async def hybrid_query(query: str, stores: Stores, param: QueryParam, *, llm: LLMCall, tokenizer: Tokenizer) -> str:
    """Answer ``query`` from the hybrid context (or return that context when ``only_need_context``)."""
    if stores.chunks_vdb is None:
        return HYBRID_NEEDS_VECTORS
    retrieval = await retrieve_hybrid(query, stores, param, tokenizer)
    return await answer_from_context(query, retrieval.context if retrieval is not None else None, param, llm,
                                     "local_rag_response", "context_data")
