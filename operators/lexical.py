"""The lexical channel: BM25 over chunks, kept incrementally in a KV store.

Vectors find what reads like the question, but only in the languages the embedder knows; a
word the question and a passage share finds the passage in any language. Each chunk is
tokenised by script (``chinese_text.search_tokens``: jieba's words for Chinese, lower-cased
words otherwise, English function words left out) and the index lives in one KV namespace,
through the storage contract only, so every backend holds it unchanged:

* ``term:<word>``: the postings, ``{chunk_id: [term frequency, chunk length]}``;
* ``chunk:<id>``: the chunk's term frequencies (what a delete takes out again);
* ``stats``: the chunk count, the summed chunk length, a digest of the chunk ids and the
  user dictionary used.

A write adds and removes exactly the chunks it adds and removes. When the index does not
hold what ``text_chunks`` holds (a working dir from before the channel, inserts or deletes
made with it switched off, another user dictionary) the write builds it again from every
chunk.
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

from xxhash import xxh64_intdigest

from .chinese_text import mostly_latin, search_tokens
from .nlp_extraction import STOPWORDS

if TYPE_CHECKING:
    from graphrag.stores import Stores
    from graphrag.storage.base import BaseKVStorage

logger = logging.getLogger(__name__)

STATS = "stats"
_TERM = "term:"
_CHUNK = "chunk:"
# BM25's usual constants (Robertson and Zaragoza, 2009): term frequency saturation and
# length normalisation.
K1 = 1.2
B = 0.75


def term_frequencies(text: str, user_dictionary: Optional[str] = None) -> dict[str, int]:
    """The searchable words of a text and how often each occurs."""
    return dict(Counter(t for t in search_tokens(text, user_dictionary) if t not in STOPWORDS))


def count_terms(chunks: Mapping[str, Mapping[str, Any]], user_dictionary: Optional[str] = None
                ) -> dict[str, dict[str, int]]:
    """Each chunk's (``{id: {"content": ...}}``) :func:`term_frequencies`."""
    return {c: term_frequencies(str(r.get("content", "")), user_dictionary) for c, r in chunks.items()}


async def update_lexical_index(index: BaseKVStorage, text_chunks: BaseKVStorage, added: dict[str, dict[str, Any]],
                               removed: list[str],
                               user_dictionary: Optional[str] = None,
                               counted_before: Optional[Mapping[str, dict[str, int]]] = None) -> None:
    """Add the ``added`` chunks (``{id: {"content": ...}}``) and take out the ``removed`` ones;
    called after ``text_chunks`` holds the write's chunks, with which the index is checked.
    ``counted_before``: :func:`count_terms` of some chunks, done beforehand (same dictionary)."""
    empty_stats = {"chunks": 0, "tokens": 0, "ids": "0"}
    stats = await index.get_by_id(STATS) or {**empty_stats, "user_dictionary": user_dictionary}
    gone = {c: r["tf"] for c, r in zip(removed, await index.get_by_ids([_CHUNK + c for c in removed])) if r}
    fresh = {c: added[c] for c, r in zip(added, await index.get_by_ids([_CHUNK + c for c in added])) if r is None}
    ids = await text_chunks.all_keys()
    # What the index held before this write must be what text_chunks holds now, less the
    # write's new chunks and plus the ones it removed; else it missed writes (made with the
    # channel off, or by an earlier version) and is built again from every chunk.
    held_before = _digest(ids) ^ _digest(gone) ^ _digest(fresh)
    if (int(stats.get("ids", "-1"), 16) != held_before or stats["chunks"] - len(gone) + len(fresh) != len(ids)
            or stats.get("user_dictionary") != user_dictionary):
        fresh = {i: r for i, r in zip(ids, await text_chunks.get_by_ids(ids, fields={"content"})) if r is not None}
        logger.info("Building the lexical index of %d chunks", len(fresh))
        await index.drop()
        stats, gone = empty_stats, {}
    known = counted_before or {}
    new = await asyncio.to_thread(count_terms, {c: r for c, r in fresh.items() if c not in known}, user_dictionary)
    counted = {c: known[c] if c in known else new[c] for c in fresh}
    terms = sorted({t for tf in (*gone.values(), *counted.values()) for t in tf})
    postings = {t: p or {} for t, p in zip(terms, await index.get_by_ids([_TERM + t for t in terms]))}
    for chunk_id, tf in gone.items():
        for term in tf:
            postings[term].pop(chunk_id, None)
    for chunk_id, tf in counted.items():
        length = sum(tf.values())
        for term, n in tf.items():
            postings[term][chunk_id] = [n, length]
    tokens = (stats["tokens"] - sum(sum(tf.values()) for tf in gone.values())
              + sum(sum(tf.values()) for tf in counted.values()))
    empty = [_TERM + t for t, p in postings.items() if not p]
    if empty or gone:
        await index.delete(empty + [_CHUNK + c for c in gone])
    await index.upsert({**{_TERM + t: p for t, p in postings.items() if p},
                        **{_CHUNK + c: {"tf": tf} for c, tf in counted.items()},
                        STATS: {"chunks": stats["chunks"] - len(gone) + len(counted), "tokens": tokens,
                                "ids": f"{int(stats['ids'], 16) ^ _digest(gone) ^ _digest(counted):x}",
                                "user_dictionary": user_dictionary}})


def _digest(ids: Iterable[str]) -> int:
    """An order-free digest of a set of chunk ids, the XOR of their hashes: adding or removing
    an id toggles its hash, so a write updates it without reading every id."""
    value = 0
    for chunk_id in ids:
        value ^= xxh64_intdigest(chunk_id.encode("utf-8", "surrogatepass"))
    return value


def bm25_scores(query_terms: list[str], postings: dict[str, dict[str, list[int]]], chunks: int,
                average_length: float) -> dict[str, float]:
    """BM25 score of every chunk holding a query term."""
    scores: dict[str, float] = {}
    for term in dict.fromkeys(query_terms):
        found = postings.get(term) or {}
        if not found:
            continue
        idf = math.log(1.0 + (chunks - len(found) + 0.5) / (len(found) + 0.5))
        for chunk_id, (tf, length) in found.items():
            norm = tf + K1 * (1.0 - B + B * length / max(average_length, 1e-9))
            scores[chunk_id] = scores.get(chunk_id, 0.0) + idf * tf * (K1 + 1.0) / norm
    return scores


async def lexical_ranking(question: str, stores: Stores, top_k: int) -> list[str]:
    """The ``top_k`` chunks BM25 ranks best for the question (ties by id) from
    ``stores.lexical_index``; empty without the index (the channel switched off, or nothing
    indexed yet) and for a question mostly in Latin script, whose query then never opens the
    index: there the vectors read the question, and on the English set no weight of the
    lexical ranking chosen on its dev half lost nothing on its test half
    (benchmarks/README.md, "Chinese documents")."""
    if mostly_latin(question):
        return []
    index = stores.lexical_index
    if index is None:
        return []
    stats = await index.get_by_id(STATS)
    if not stats or not stats.get("chunks"):
        return []
    dictionary = stats.get("user_dictionary")
    if dictionary is not None and not os.path.isfile(dictionary):
        # Moved since the index was built: its words may now split, matching less; the next
        # insert with the dictionary where it now is builds the index again.
        logger.warning("The lexical index was built with user dictionary %s, which is gone; "
                       "questions are segmented without it", dictionary)
        dictionary = None
    terms = sorted(set(term_frequencies(question, dictionary)))
    postings = dict(zip(terms, await index.get_by_ids([_TERM + t for t in terms])))
    scores = bm25_scores(terms, {t: p for t, p in postings.items() if p}, stats["chunks"],
                         stats["tokens"] / stats["chunks"])
    return sorted(scores, key=lambda c: (-scores[c], c))[:top_k]


def dense_for_fusion(question: str, dense: list[str], lexical: list[str], vectors: Optional[object]) -> list[str]:
    """The vector ranking as it joins the fusion: none for a question mostly not in Latin script
    when the embedder reads Latin script only (``EmbeddingFunc.latin_only``) and the lexical
    channel ranked chunks for it (``vectors``: the chunk vector store, whose ``embedding_func``
    says). Fused beside BM25 such a ranking only displaced BM25's best chunks (benchmarks/README.md, "The vector ranking of an embedder that cannot read the question")."""
    if lexical and not embedder_reads(getattr(vectors, "embedding_func", None), question):
        return []
    return dense


def embedder_reads(embedder: object, question: str) -> bool:
    """False when the embedder reads Latin script only (``EmbeddingFunc.latin_only``) and the
    question is mostly in another script. A question without letters (a year, a code) is in no
    script: the vectors keep their say."""
    return (not getattr(embedder, "latin_only", False) or mostly_latin(question)
            or not any(ch.isalpha() for ch in question))
