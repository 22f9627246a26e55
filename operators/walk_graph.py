"""The walk's graph: entities and chunks as sparse matrices plus name lookups, built once per
index version and reused by every hybrid or local query until the next commit.

The seeding and scoring of the walk live in ``query_hybrid.py``; this module only says what
the graph is and when it is (re)built.
"""
from __future__ import annotations

import itertools
import logging
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from graphrag.schema import GRAPH_FIELD_SEP

from .extraction import normalize_entity_name
from .names import loose_key

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix
    from graphrag.schema import JSONValue
    from graphrag.stores import Stores

logger = logging.getLogger(__name__)

# Synonym links: two entities whose names' character 3-gram vectors have at least this cosine
# are linked in the walk (None: no synonym links); names sharing a word are the candidates,
# and a word in more than SYNONYM_BLOCK names is no clue.
SYNONYM_MIN_COSINE: Optional[float] = None
SYNONYM_BLOCK = 50
# The looser name key, for matching names inside running text.
loose_name = loose_key
# Walks kept per index version (GraphIndex.walk): a question asked again, or by another mode.
WALKS_KEPT = 32


def _split(value: JSONValue) -> list[str]:
    return [p for p in str(value or "").split(GRAPH_FIELD_SEP) if p]


@dataclass
class GraphIndex:
    """The entity-chunk graph of one index version, as matrices and name lookups."""

    entities: list[str]
    chunks: list[str]
    # Row-stochastic transitions, stored transposed so one step is ``transition_t @ p``.
    transition_t: "csr_matrix"
    specificity: np.ndarray  # per entity: 1 / number of chunks mentioning it
    degree: np.ndarray  # per node: its links (at least 1)
    exact: dict[str, list[int]]
    loose: dict[str, list[int]]
    loose_names: list[str]
    by_word: dict[str, list[int]]  # loose-name word -> entities, for fuzzy candidates

    @property
    def chunk_offset(self) -> int:
        return len(self.entities)

    def __post_init__(self) -> None:
        self._chunk_position = {c: i for i, c in enumerate(self.chunks)}
        self._entity_position = {e: i for i, e in enumerate(self.entities)}
        self._walks: OrderedDict[tuple[tuple[float, ...], int, bytes, bytes], np.ndarray] = OrderedDict()
        self._walks_lock = threading.Lock()

    def walk(self, restart: np.ndarray, walk: Callable[["csr_matrix", np.ndarray], np.ndarray],
             settings: tuple[float, ...] = ()) -> np.ndarray:
        """``walk(self.transition_t, restart)``, kept for the last ``WALKS_KEPT`` restarts.
        A walk is deterministic, so the same restart (the same bits) over the same matrices
        gives the same scores: a question asked again, or by local and then hybrid mode with
        the same seeds, reuses them instead of a power iteration over every link. ``settings``
        are the values ``walk`` reads besides its arguments (its damping, steps, tolerance):
        part of the key, so a walk under other settings is never answered from a kept one.
        The kept scores live as long as this index version (a commit builds a new index);
        they are read-only, shared by every caller."""
        seeds = np.flatnonzero(restart)
        key = (settings, len(restart), seeds.tobytes(), restart[seeds].tobytes())
        with self._walks_lock:
            scores = self._walks.pop(key, None)
        if scores is None:
            scores = walk(self.transition_t, restart)
            scores.flags.writeable = False
        with self._walks_lock:
            self._walks[key] = scores
            while len(self._walks) > WALKS_KEPT:
                self._walks.popitem(last=False)
        return scores

    def chunk_position(self, chunk_id: str) -> Optional[int]:
        return self._chunk_position.get(chunk_id)

    def entity_position(self, name: str) -> Optional[int]:
        return self._entity_position.get(name)


def _trigrams(name: str) -> set[str]:
    padded = f" {name} "
    return {padded[i:i + 3] for i in range(len(padded) - 2)}


def synonym_pairs(loose_names: list[str], by_word: dict[str, list[int]], min_cosine: float) -> list[tuple[int, int]]:
    """Entity pairs (by position) whose loose names are close as character 3-gram vectors:
    spelling variants and partial names the resolution left as separate nodes (``MARA TELLEN``,
    ``MARA J TELLEN``). A pair's link depends on its two names only, so it is the same
    whatever else the graph holds: exact under any insert or delete."""
    grams = [_trigrams(n) for n in loose_names]
    seen: set[tuple[int, int]] = set()
    pairs = []
    for members in by_word.values():
        if len(members) > SYNONYM_BLOCK:
            continue
        for x, i in enumerate(members):
            for j in members[x + 1:]:
                key = (i, j) if i < j else (j, i)
                if key in seen or loose_names[i] == loose_names[j]:
                    continue
                seen.add(key)
                shared = len(grams[i] & grams[j])
                if shared and shared / (len(grams[i]) * len(grams[j])) ** 0.5 >= min_cosine:
                    pairs.append(key)
    return sorted(pairs)


def build_graph_index(nodes: list[tuple[str, str]], edges: list[tuple[str, str]]) -> GraphIndex:
    """Matrices for the walk from the graph's nodes as ``(name, source_id)`` and edges as
    ``(end, end)`` (``graphrag.storage.base.walk_links``): entities first (sorted), then the chunks they mention (sorted),
    so a build from the same index is the same whatever order the stores list things in.
    A chunk no entity mentions is not in the graph; a query that finds it by similarity
    adds it as a node without links (:func:`rank`)."""
    from scipy.sparse import coo_matrix

    nodes = sorted(nodes, key=lambda n: n[0])
    entities = [name for name, _ in nodes]
    sources = [_split(source_id) for _, source_id in nodes]
    chunks = sorted(set(itertools.chain.from_iterable(sources)))
    entity_at = {n: i for i, n in enumerate(entities)}
    chunk_at = {c: len(entities) + i for i, c in enumerate(chunks)}
    size = len(entities) + len(chunks)

    # Built in numpy from flat lists: a Python loop per mention was most of the build.
    mention_entity = np.repeat(np.arange(len(entities)), np.fromiter(map(len, sources), np.intp, len(sources)))
    flat = list(itertools.chain.from_iterable(sources))
    mention_chunk = np.fromiter(map(chunk_at.__getitem__, flat), np.intp, len(flat))
    # An entity listing a chunk twice still mentions it once.
    pairs = np.unique(mention_entity * size + mention_chunk)
    mentions = np.bincount(pairs // size, minlength=len(entities)).astype(np.float64)
    ends = np.fromiter((entity_at.get(end, -1) for edge in edges for end in edge[:2]), np.intp, 2 * len(edges))
    a, b = ends[0::2], ends[1::2]
    linked = (a >= 0) & (b >= 0) & (a != b)
    a, b = a[linked], b[linked]
    rows = [pairs // size, pairs % size, a, b]
    cols = [pairs % size, pairs // size, b, a]
    exact: dict[str, list[int]] = {}
    loose: dict[str, list[int]] = {}
    by_word: dict[str, list[int]] = {}
    loose_names = [loose_name(name) for name in entities]
    for i, (name, key) in enumerate(zip(entities, loose_names)):
        exact.setdefault(normalize_entity_name(name), []).append(i)
        if key:
            loose.setdefault(key, []).append(i)
            for word in set(key.split()):
                by_word.setdefault(word, []).append(i)
    if SYNONYM_MIN_COSINE is not None:
        synonyms = np.array(synonym_pairs(loose_names, by_word, SYNONYM_MIN_COSINE), dtype=np.intp).reshape(-1, 2)
        rows += [synonyms[:, 0], synonyms[:, 1]]
        cols += [synonyms[:, 1], synonyms[:, 0]]
    row, col = np.concatenate(rows), np.concatenate(cols)
    adjacency = coo_matrix((np.ones(len(row)), (row, col)), shape=(size, size)).tocsr()
    adjacency.data[:] = 1.0  # an entity listed twice for a chunk is still one link
    out_degree = np.asarray(adjacency.sum(axis=1)).ravel()
    out_degree[out_degree == 0] = 1.0
    transition = adjacency  # every link weighs 1: its row's share is 1 / the row's degree
    transition.data = np.repeat(1.0 / out_degree, np.diff(adjacency.indptr))

    return GraphIndex(entities=entities, chunks=chunks, transition_t=transition.T.tocsr(),
                      specificity=1.0 / np.maximum(mentions, 1.0), degree=out_degree, exact=exact, loose=loose,
                      loose_names=loose_names, by_word=by_word)


# One index per Stores object, rebuilt when its version moves on (each commit or reload) or
# its graph store reports another process's change.
_indexes: "weakref.WeakKeyDictionary[Any, tuple[Any, GraphIndex]]" = weakref.WeakKeyDictionary()


async def graph_index(stores: Stores) -> GraphIndex:
    """The walk's matrices for the stores' current index version, built on first use (from
    what the graph store keeps for it, so a query process need not parse the whole graph)."""
    version = (stores.version, await stores.graph.change_token(), SYNONYM_MIN_COSINE)
    cached = _indexes.get(stores)
    if cached is not None and cached[0] == version:
        return cached[1]
    from graphrag.storage.base import walk_links  # the storage package imports networkx

    index = build_graph_index(*await walk_links(stores.graph))
    logger.info("Built the hybrid ranking graph: %d entities, %d chunks, %d links", len(index.entities),
                len(index.chunks), index.transition_t.nnz)
    _indexes[stores] = (version, index)
    return index
