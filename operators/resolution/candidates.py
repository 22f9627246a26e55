"""Blocking: which names are worth comparing with a given one, decided by the pair
alone (so candidates do not depend on the order documents came in)."""
from __future__ import annotations

import zlib
from functools import lru_cache
from itertools import combinations
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Union


from .keys import (FUZZY_SIMILARITY, SPELLING_EDITS, UNSETTLED_RELATIONS, UNWORKED, abbreviated, acronym_of,
                   acronyms_of, designation, gram_similarity, name_grams,
                   name_key, name_relation, name_words, owned, spelling_variant, spelt)
from .words import NICKNAME_WORDS

if TYPE_CHECKING:
    import numpy as np

# A blocking key: its kind, then that kind's own values (a key's words, a word, a band of a
# MinHash signature, letters and a length). Any: the values differ by kind; the key is only
# hashed, and the few readers of a kind's fields know its shape.
Block = tuple[Any, ...]


# MinHash over character 3-grams: BANDS x ROWS signature, bucketed per band. Two names
# share a bucket with probability 1-(1-j^ROWS)^BANDS for 3-gram Jaccard j (about 0.5 at
# j = 0.6): spelling variants meet, unrelated names rarely do.
_BANDS, _ROWS = 6, 3
# Shorter names are looked up among the subsets of at most this many of a name's words.
_MAX_SUBSET_WORDS = 8
# Which blocks meet which: a name looks up, for each block it is indexed under, the blocks of
# the kinds that one meets, with the same value. The relation is symmetric (a kind meets
# another iff that one meets it), so a name meets another iff the other meets it: candidates
# do not depend on which of the two is looked up (nor on which came in last).
_MEETS: dict[str, tuple[str, ...]] = {
    "key": ("key", "head"), "head": ("key",),  # THE STEWARD / HALE'S STEWARD
    "words": ("words",), "owned": ("owned",),
    "acronym": ("expands",), "expands": ("acronym",),
    # A name with an initial meets every name of its shape; two without one do not meet there.
    "shape": ("shape-with-initial",), "shape-with-initial": ("shape", "shape-with-initial"),
    "first": ("nickname", "sole"), "nickname": ("first",),  # LITTLE NED / NED BRANT
    "last": ("sole",), "sole": ("first", "last"),  # DOE, J. DOE / JOHN T. DOE
}
_PRIME = (1 << 31) - 1
# A long name meets its spelling variants by its first or its last letters, this many, and its
# length: an edit or two leaves one end as it was unless there is one at each end, and the
# lengths within as many letters.
_SPELLING_END = 6
# Names a blocking bucket keeps in a tuple before it becomes a set.
_SMALL_BUCKET = 8
_PERMUTATIONS = [((i * 2654435761 + 97) % _PRIME or 1, (i * 40503 + 13) % _PRIME) for i in range(_BANDS * _ROWS)]


@lru_cache(maxsize=1)
def _coefficients() -> tuple[np.ndarray, np.ndarray]:
    """The permutations' multipliers and offsets as numpy columns (numpy imported lazily)."""
    import numpy as np

    return (np.array([x for x, _ in _PERMUTATIONS], dtype=np.int64)[:, None],
            np.array([y for _, y in _PERMUTATIONS], dtype=np.int64)[:, None])


def _signatures(names: list[str]) -> list[list[int]]:
    """The MinHash signature of each name, computed for many names at once (numpy over every
    permutation and every name's grams: the cost is in the call, not the arithmetic)."""
    import numpy as np

    multipliers, offsets = _coefficients()
    found: list[list[int]] = []
    for start in range(0, len(names), 2048):  # bounded memory: permutations x grams
        grams = [[zlib.crc32(g.encode("utf-8")) for g in name_grams(n)] for n in names[start:start + 2048]]
        if not grams:
            continue
        hashes = np.fromiter((h for row in grams for h in row), dtype=np.int64)
        starts = np.cumsum([0] + [len(row) for row in grams[:-1]])
        # (x * h + y) stays below 2**63 (x, y < 2**31, h < 2**32): int64 arithmetic is exact.
        values = (multipliers * hashes[None, :] + offsets) % _PRIME
        found += np.minimum.reduceat(values, starts, axis=1).T.tolist()
    return found


@lru_cache(maxsize=1 << 17)
def _indexed_blocks(name: str) -> tuple[Block, ...]:
    """The blocking keys ``name`` is indexed under: its key, its set of words, its acronym,
    each word and initial, its one word or all its words (initials aside), the shape of its
    initials."""
    key = name_key(name)
    tokens = _tokens(key)
    blocks: list[Block] = [("key", key), ("words", tuple(sorted(set(key)))),
                                     *(("token", t) for t in tokens),
                                     *(("initial", t) for t in sorted(set(key)) if len(t) == 1)]
    if len(tokens) == 1:  # settled only as the first or last word of a name (see _MEETS)
        blocks.append(("sole", tokens[0]))
    elif len(tokens) > 1:  # met by the fuller names holding all its words (by its first two)
        blocks.append(("first-two", tokens[:2]))
    # An acronym meets the names it could stand for (not other names with the same initials).
    if len(key) > 1 and acronym_of(key):
        blocks += [("expands", acronym) for acronym in acronyms_of(key)]
    elif len(key) == 1 and 2 <= len(key[0]) <= 6:
        blocks.append(("acronym", key[0]))
    if len(key) == 1 and (short := abbreviated(key[0])):  # 北京大学 meets 北大
        blocks.append(("expands", short))
    if len(key) >= 2 and name_words(key) <= 3:  # where a one-word name may be its first name or its surname
        blocks += [("first", key[0]), ("last", key[-1])]
    if len(key) == 2 and key[0] in NICKNAME_WORDS:  # "LITTLE NED" meets "NED BRANT"
        blocks.append(("nickname", key[1]))
    if found := designation(name):  # "HALE'S PARTNER" meets what is said to be Hale's partner
        blocks.append(("designation", found[0], found[1][-1]))
    if found := owned(name):  # ... and "GHOST OF JAMES MORROW" meets "MORROW'S GHOST", "THE GHOST"
        blocks += [("owned", *found), ("head", found[1])]
    blocks += _spelling_blocks(key)
    if len(key) > 1:  # "J. MORROW" meets "JAMES MORROW" by the shape of their initials
        shape = tuple(t[0] for t in key)
        blocks.append(("shape", shape))
        if any(len(t) == 1 for t in key):
            blocks.append(("shape-with-initial", shape))
    return tuple(blocks)


def _spelling_blocks(key: tuple[str, ...]) -> list[Block]:
    """Where a name that may have spelling variants (:func:`.keys.name_relation`'s ``spelling``)
    is indexed: its first and its last letters, run together, with its length."""
    letters = spelt(key)
    if letters is None:
        return []
    return [("spelt", "head", letters[:_SPELLING_END], len(letters)),
            ("spelt", "tail", letters[-_SPELLING_END:], len(letters))]


@lru_cache(maxsize=1 << 17)
def _tokens(key: tuple[str, ...]) -> tuple[str, ...]:
    """A key's words that are more than an initial, sorted, each once."""
    return tuple(sorted({t for t in key if len(t) > 1}))


@lru_cache(maxsize=1 << 16)
def _first_two_blocks(tokens: tuple[str, ...]) -> tuple[Block, ...]:
    """Where the names of two words or more whose words are all among ``tokens`` are indexed
    (under their first two): every pair of ``tokens``."""
    return tuple(("first-two", c) for c in combinations(tokens, 2))


@lru_cache(maxsize=1 << 17)
def _subset_words(name: str) -> tuple[str, ...]:
    """The words whose subsets ``name`` looks up as shorter names: its set of words, sorted,
    cut at ``_MAX_SUBSET_WORDS``."""
    return tuple(sorted(set(name_key(name))))[:_MAX_SUBSET_WORDS]


@lru_cache(maxsize=1 << 16)
def _looked_up_blocks(name: str) -> tuple[Block, ...]:
    """The blocking keys looked up for ``name``: the blocks its own blocks meet (``_MEETS``),
    and every part of two words or more of its set of words (the shorter names inside it). The
    fuller names that hold all its words are found from its words' postings (see
    :meth:`NameIndex.candidates`). Names of one word inside it are not looked up here: the
    rules settle such a pair only as a first name or surname, an acronym, a category, a
    possessive or a spelling, each met at its own block; otherwise it is ``overlap``, which
    only loose blocking keeps (and looks those names up for)."""
    own = [(kind, *b[1:]) for b in _indexed_blocks(name) for kind in _MEETS.get(b[0], ())]
    parts = _subset_words(name)
    own += [("words", c) for size in range(2, len(parts)) for c in combinations(parts, size)]
    return tuple(dict.fromkeys(own))


@lru_cache(maxsize=1 << 16)
def _spelling_lookups(name: str) -> tuple[Block, ...]:
    """The blocks where ``name``'s spelling variants are indexed: its ends, at lengths within
    the edits allowed."""
    return tuple((*b[:3], b[3] + d) for b in _spelling_blocks(name_key(name))
                 for d in range(-SPELLING_EDITS, SPELLING_EDITS + 1))


def _bands(names: list[str]) -> list[tuple[Block, ...]]:
    """Each name's LSH blocks: its signature cut into bands."""
    return [tuple(("lsh", i, *signature[i * _ROWS:(i + 1) * _ROWS]) for i in range(_BANDS))
            for signature in _signatures(names)]


class NameIndex:
    """Blocking index over every name of the graph: which names are worth comparing with
    a given one. Membership of a pair depends on the two names only, never on what else
    is indexed, and a pair is found from either name with one relation (every lookup has its
    mirror): looking up only the names a write touched finds every pair of theirs a full
    build finds, so candidate pairs do not depend on the order documents came in.

    ``loose``: also every name sharing a word, or an LSH bucket and a similar spelling (``fuzzy``'s
    3-gram similarity), and the pairs whose names only share words or spelling
    (``UNSETTLED_RELATIONS``): pairs only a model or a person can settle, so only looked up for them.
    A pair met only there by a shared word or initial comes as ``UNWORKED``: its relation is
    worked out by the pass, and only where the two profiles could make it worth asking.
    """

    def __init__(self, names: Iterable[str] = (), loose: bool = False) -> None:
        self.loose = loose
        self.names: set[str] = set()
        # Most blocks hold one name: kept as the bare string, a few as a tuple, a set only
        # past _SMALL_BUCKET (a set per small block would stay tracked by the garbage
        # collector and weigh on every full collection; a tuple of strings is not tracked).
        self._buckets: dict[Block, Union[str, tuple[str, ...], set[str]]] = {}
        # With ``loose``: the LSH blocks of each indexed name (computed a batch at a time).
        self._lsh: dict[str, tuple[Block, ...]] = {}
        self.update(names, ())

    def update(self, added: Iterable[str], removed: Iterable[str]) -> None:
        buckets = self._buckets
        added, removed = list(added), list(removed)
        if self.loose:
            self._lsh.update(zip(added, _bands(added)))
        for name in removed:
            self.names.discard(name)
            for block in self._blocks_of(name):
                bucket = buckets.get(block)
                if bucket == name:
                    del buckets[block]
                elif isinstance(bucket, set):
                    bucket.discard(name)
                    if len(bucket) == 1:
                        buckets[block] = next(iter(bucket))
                elif isinstance(bucket, tuple) and name in bucket:
                    left = tuple(n for n in bucket if n != name)
                    buckets[block] = left[0] if len(left) == 1 else left
        for name in added:
            self.names.add(name)
            for block in self._blocks_of(name):
                bucket = buckets.get(block)
                if bucket is None:
                    buckets[block] = name
                elif isinstance(bucket, set):
                    bucket.add(name)
                elif isinstance(bucket, str):
                    if bucket != name:
                        buckets[block] = (bucket, name)
                elif name not in bucket:
                    buckets[block] = (*bucket, name) if len(bucket) < _SMALL_BUCKET else {*bucket, name}
        for name in removed if self.loose else ():
            if name not in self.names:
                self._lsh.pop(name, None)

    def _bucket(self, block: Block) -> set[str]:
        found = self._buckets.get(block)
        if isinstance(found, str):
            return {found}
        return set(found) if isinstance(found, tuple) else found or set()

    def _gather(self, seen: set[str], blocks: Iterable[Block]) -> None:
        """Add the names of ``blocks`` to ``seen`` (no set made per block: most hold one name)."""
        buckets = self._buckets
        for block in blocks:
            found = buckets.get(block)
            if isinstance(found, str):
                seen.add(found)
            elif found:
                seen.update(found)

    def _blocks_of(self, name: str) -> tuple[Block, ...]:
        return _indexed_blocks(name) + (self._lsh_of(name) if self.loose else ())

    def _lsh_of(self, name: str) -> tuple[Block, ...]:
        found = self._lsh.get(name)
        return found if found is not None else _bands([name])[0]

    def _within(self, tokens: tuple[str, ...]) -> set[str]:
        """Indexed names of two words or more (initials aside), each of them one of ``tokens``."""
        gathered: set[str] = set()
        self._gather(gathered, _first_two_blocks(tokens))
        own = set(tokens)
        return {n for n in gathered if own.issuperset(_tokens(name_key(n)))}

    def _fuller(self, key: tuple[str, ...]) -> set[str]:
        """Indexed names that look the name of ``key`` up among the subsets of their words
        (``_subset_words``): those holding every word of it and more."""
        words = set(key)
        return {n for n in self._in_every([("token" if len(w) > 1 else "initial", w) for w in words])
                if len(parts := _subset_words(n)) > len(words) and words.issubset(parts)}

    def _in_every(self, blocks: list[Block]) -> Iterable[str]:
        """The names of every one of ``blocks``: the smallest bucket's, kept where each other
        bucket holds them (no bucket copied: a word's may hold thousands of names)."""
        buckets = [self._buckets.get(b) for b in blocks]
        if not buckets or not all(buckets):
            return ()
        members = sorted(((b,) if isinstance(b, str) else b for b in buckets if b), key=len)
        return [n for n in members[0] if all(n in m for m in members[1:])]

    def claimed(self, claim: str) -> set[str]:
        """Indexed names a description's claim key (:func:`description_claims`) may name."""
        kind, _, rest = claim.partition(" ")
        block = ("key", tuple(rest.split())) if kind == "K" else ("designation", *rest.split())
        return self._bucket(block)

    def candidates(self, name: str) -> dict[str, str]:
        """Indexed names that could denote the same thing as ``name``, each with its
        :func:`name_relation`; with ``loose``, the names only loose blocking meets with
        ``UNWORKED`` (their relation is unsettled or none, worked out where it matters)."""
        seen: set[str] = set()
        found = self._settled(name, seen)
        if not self.loose:
            return found
        # Besides, every name sharing a word (the fuller names among them), or one of its words
        # or initials alone, and the names that look this one up as such.
        key = name_key(name)
        tokens = _tokens(key)
        self._gather(seen, [("token", t) for t in tokens])
        if len(parts := _subset_words(name)) > 1:
            self._gather(seen, [("words", (w,)) for w in parts])
        if not tokens:
            seen |= self._fuller(key)
        seen.discard(name)
        for other in seen - found.keys():
            found[other] = UNWORKED
        # Names met only at an LSH bucket (there to find similar spellings) count only where the
        # spellings are that similar (``fuzzy``'s test first: it is cheap, and most names met there
        # share nothing else); a pair of theirs only a model settles otherwise is not looked for.
        alike: set[str] = set()
        self._gather(alike, self._lsh_of(name))
        for other in alike - seen - found.keys() - {name}:
            if gram_similarity(name, other) >= FUZZY_SIMILARITY and (relation := name_relation(name, other)):
                found[other] = relation
        return found

    def _settled(self, name: str, seen: set[str]) -> dict[str, str]:
        """The names strict blocking meets ``name`` with, each with its relation, one that the
        names alone may settle (none of ``UNSETTLED_RELATIONS``). ``seen`` gets every name
        met at its name blocks (the spelling blocks aside)."""
        self._gather(seen, _looked_up_blocks(name))
        key = name_key(name)
        tokens = _tokens(key)
        if len(tokens) > 1:
            # The fuller names holding every word of this one, and the other way round, the
            # names of two words or more, every one of them in this one.
            seen.update(self._in_every([("token", t) for t in tokens]))
            seen |= self._within(tokens)
        # The other way round from the shorter names looked up by their words: the names that
        # look this one up (found above where a name shares all its words with this one): only
        # for two words or more, as the lookups of one word are loose only.
        elif len(set(key)) > 1:
            seen |= self._fuller(key)
        seen.discard(name)
        found = {}
        for other in seen:
            relation = name_relation(name, other)
            if relation is not None and relation not in UNSETTLED_RELATIONS:
                found[other] = relation
        # Names met only at a spelling block count only as spelling variants (the spelling test
        # first: it is cheap, and most names there are not).
        variants: set[str] = set()
        self._gather(variants, _spelling_lookups(name))
        for other in variants - seen - {name}:
            if spelling_variant(key, name_key(other)) and name_relation(name, other) == "spelling":
                found[other] = "spelling"
        return found


def similar_pairs(vectors: Mapping[str, np.ndarray], names: Iterable[str], threshold: float) -> set[tuple[str, str]]:
    """Pairs of one of ``names`` and any name of ``vectors`` (unit vectors of name plus
    description) whose cosine reaches ``threshold``: a predicate on the pair's own vectors,
    so the pairs found do not depend on what else is indexed."""
    import numpy as np

    every = sorted(vectors)
    wanted = sorted(n for n in set(names) if n in vectors)
    if not every or not wanted:
        return set()
    matrix = np.stack([vectors[n] for n in every])
    found: set[tuple[str, str]] = set()
    for start in range(0, len(wanted), 256):
        batch = wanted[start:start + 256]
        scores = np.stack([vectors[n] for n in batch]) @ matrix.T
        for row, col in zip(*np.nonzero(scores >= threshold)):
            a, b = batch[row], every[col]
            if a != b:
                found.add((min(a, b), max(a, b)))
    return found


class LookupsAhead:
    """Blocking as a write's names arrive (its extractions come in one by one): each batch is
    indexed, then each of its names looked up against every name indexed so far (see
    ``store.NamesLookedUp`` for why that finds every pair). Run by ``lookup_worker``."""

    def __init__(self, index: NameIndex) -> None:
        self.index = index
        self.found: dict[str, dict[str, str]] = {}

    def add(self, names: Iterable[str]) -> list[str]:
        """Index the names not seen yet (those of the last write already are); returns them,
        to :meth:`look_up` (after this call: a name is indexed before any later one is looked up)."""
        new = [n for n in dict.fromkeys(names) if n not in self.found]
        self.index.update([n for n in new if n not in self.index.names], ())
        self.found.update((n, {}) for n in new)
        return new

    def look_up(self, names: Iterable[str]) -> None:
        for name in names:
            self.found[name] = self.index.candidates(name)
