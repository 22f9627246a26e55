"""Resolution stage, store side: after a merge, decide again what the changed names are,
and rebuild the nodes whose alias map changed.

State lives in records of a KV store (the working dir's ``index_meta``): the derived state
(every name, the accepted pairs, the alias map; a pure function of the recorded extractions,
the manual decisions and the verdicts) in ``entity_resolution/head`` and its shards,
``entity_resolution_manual`` (the user's merges and never-merge rules, never derived) and
``entity_resolution_verdicts`` (a model's answers per pair, :mod:`.judge`).
"""
from __future__ import annotations

import asyncio
import math
import logging
import pickle
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, Optional

from graphrag.kept import PerOwner
from graphrag.operators.extraction import LLMCall
from graphrag.schema import GRAPH_FIELD_SEP, ChunkExtraction

from .candidates import NameIndex, similar_pairs
from .core import RULES, AliasMap, ManualDecisions, ResolutionState, group_names, regroup
from .evidence import NameProfile, PairDecision, cannot_be_asked, chunk_claims, decide_pair, name_profiles, name_targets, raw_names
from .judge import Judge
from .lookup_worker import LookupProcess
from .keys import UNSETTLED_RELATIONS, UNWORKED, name_relation

if TYPE_CHECKING:
    import numpy as np

    from graphrag.storage.base import BaseGraphStorage, BaseKVStorage

logger = logging.getLogger(__name__)

# Written by earlier versions: the whole derived state in one record (read while no write
# has replaced it with the head and shards).
STATE_RECORD = "entity_resolution"
# The rules, the manual fingerprint and the shard count; the names, pairs and aliases are
# split over shards by a stable hash of the name (of a pair's first name), so a write
# rewrites only the shards it changed.
HEAD_RECORD = "entity_resolution/head"
SHARDS = 256
MANUAL_RECORD = "entity_resolution_manual"
# A write extracting at least this many chunks looks its names up ahead, in a second process
# (``lookup_worker``); below it, starting one costs more than the lookups.
LOOKUP_PROCESS_CHUNKS = 200
# Names sent to the lookup process in one request, at most: the pass takes only whole answers,
# so a request still out when it starts is work lost (names pile up while the process starts:
# unbounded, the last request could hold most of a write's names).
LOOKUP_BATCH = 100

ExtractionReader = Callable[[list[str]], Awaitable[list[Optional[ChunkExtraction]]]]

@dataclass
class _Kept:
    """What one process keeps between the writes of one working dir: the blocking index of
    its names (rebuilt when the names it holds are not the recorded ones: another process
    wrote); each profile read, with the node it was read from and that node's chunks (a
    profile is read from the chunks naming its name, all of them in its node's
    ``source_id``: while that node lists the same chunks, the profile is the same, whoever
    wrote since); and with embedding blocking, each name's vector (the text embedded, its
    unit vector) with the derived records they were computed for. A name's text is its name
    and sample description, read from its own extractions, so a vector is stale only when
    the name was touched; all are dropped when the recorded state is not the one they were
    left with (a failed write, another process's write). Not seen: another process's write
    that re-describes names without changing the record; those vectors wait for the next
    touch."""

    index: Optional[NameIndex] = None
    profiles: dict[str, tuple[str, str, NameProfile]] = field(default_factory=dict)
    vectors: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    records: Optional[dict[str, Any]] = None


# Per the working dir's ``index_meta`` store object, not by a path: what is kept lives and
# dies with the stores of one GraphRAG instance (stores reopened after a failed write start
# afresh), and two instances never share it.
_KEPT: PerOwner[_Kept] = PerOwner(_Kept)


EmbedFunc = Callable[[list[str]], Awaitable["np.ndarray"]]


@dataclass(frozen=True)
class ResolutionSettings:
    threshold: float = 0.7
    ask_threshold: float = 0.4
    # Pairs per model prompt when ambiguous pairs are checked.
    batch_size: int = 20
    # Judge calls per write, at most this share of the write's extraction calls (at least one).
    judge_share: float = 0.05
    # With embedding blocking: the cosine of name-plus-description vectors that makes a pair
    # a candidate (one only a model or a person settles unless the names are related).
    embedding_threshold: float = 0.9


@dataclass
class Resolution:
    """The outcome of one resolution pass."""

    state: ResolutionState
    previous: AliasMap
    moved: set[str] = field(default_factory=set)
    # Chunks recorded before resolution was on: their nodes are rebuilt with it.
    unresolved: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


def _split_ids(value: object) -> list[str]:
    return [v for v in str(value or "").split(GRAPH_FIELD_SEP) if v]


def _redecided(recorded: set[tuple[str, str]], found: set[tuple[str, str]], touched: set[str],
               changed: set[str]) -> set[tuple[str, str]]:
    """The ``recorded`` pairs of untouched names and the ``found`` ones (those of touched
    names were decided again); the ends of each pair that came or went join ``changed``."""
    pairs = {p for p in recorded if p[0] not in touched and p[1] not in touched} | found
    for pair in pairs ^ recorded:
        changed.update(pair)
    return pairs


def _recorded_claims(profiles: dict[str, NameProfile], claims: set[tuple[str, str, str]]) -> None:
    """Give each profile the claims recorded per chunk for its name: the same as reading its
    descriptions again (a profile keeps a chunk's first description, as ``chunk_claims`` does)."""
    by_name: dict[str, set[str]] = {}
    for name, claim, _ in claims:
        by_name.setdefault(name, set()).add(claim)
    for name, profile in profiles.items():
        profile.claims = by_name.get(name, set())  # type: ignore[misc]


def _candidate_pairs(present: set[str], claims: set[tuple[str, str, str]], index: NameIndex,
                     ahead: Optional["NamesLookedUp"] = None) -> dict[tuple[str, str], str]:
    """Every pair of a present name worth deciding, with its relation: the name blocks'
    candidates (of the names ``ahead`` looked up while they arrived, its pairs), and the pairs
    a description states ("stated") where the names alone do not settle them."""
    looked_up = present & ahead.found.keys() if ahead is not None else set()
    candidates = ahead.pairs(looked_up, index.names) if ahead is not None else {}
    for name in sorted(present - looked_up):
        for other, relation in index.candidates(name).items():
            candidates[(min(name, other), max(name, other))] = relation
    for pair in _stated_pairs(present, claims, index):
        if candidates.get(pair) in (None, UNWORKED, *UNSETTLED_RELATIONS):
            candidates[pair] = "stated"
    return candidates


def _stated_pairs(present: set[str], claims: set[tuple[str, str, str]], index: NameIndex) -> set[tuple[str, str]]:
    """Pairs of a present name and a name some description states it is: what the present
    name's descriptions claim, and who claims to be the present name."""
    claimed_by: dict[str, set[str]] = {}
    for name, claim, _ in claims:
        claimed_by.setdefault(claim, set()).add(name)
    found: set[tuple[str, str]] = set()
    for name, claim, _ in claims:
        if name in present:
            found.update((min(name, o), max(name, o)) for o in index.claimed(claim) if o != name)
    for name in present:
        for target in name_targets(name):
            found.update((min(name, o), max(name, o)) for o in claimed_by.get(target, ()) if o != name and o in index.names)
    return found


def _shard_keys(count: int) -> list[str]:
    return [f"{STATE_RECORD}/{i:03d}" for i in range(count)]


def _shard(name: str, count: int) -> int:
    return zlib.crc32(name.encode("utf-8")) % count


_ROW_FIELDS = ("pairs", "parts", "person_pairs", "sharing", "covering", "claims", "pending")


def joined_state(records: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The derived state as one record (``ResolutionState.from_stored`` reads it) from the
    records holding it: an earlier version's single record if there is one (a write by this
    version deletes it, so if present it is the latest), else the head and its shards."""
    if records.get(STATE_RECORD):
        return records[STATE_RECORD]
    head = records.get(HEAD_RECORD)
    if not head:
        return None
    shards = [records.get(k) or {} for k in _shard_keys(head["shards"])]
    joined: dict[str, Any] = {f: [x for s in shards for x in s.get(f, ())]
                              for f in ("names", *_ROW_FIELDS)}
    joined["aliases"] = {a: c for s in shards for a, c in s.get("aliases", {}).items()}
    return {**joined, **{k: v for k, v in head.items() if k != "shards"}}


def _shard_record(names: Iterable[str], aliases: Mapping[str, str], rows: Mapping[str, Iterable[tuple]]
                  ) -> dict[str, Any]:
    """One shard's record from the elements in it (each list sorted; empty fields left out)."""
    record: dict[str, Any] = {}
    if names:
        record["names"] = sorted(names)
    if aliases:
        record["aliases"] = dict(sorted(aliases.items()))
    for key in _ROW_FIELDS:
        if rows.get(key):
            record[key] = [list(row) for row in sorted(rows[key])]
    return record


def state_records(state: ResolutionState, previous: Optional[ResolutionState] = None,
                   base: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The records ``state`` is written as: the head and every non-empty shard. With
    ``previous`` and ``base`` (the records ``previous`` is written as), only the shards holding
    an element that came, went or changed are built again; the others are ``base``'s: a shard
    is a function of the elements in it, and a write changes few of the names."""
    if previous is None or base is None:
        shards = [(set(), {}, {key: set() for key in _ROW_FIELDS}) for _ in range(SHARDS)]
        for name in state.names:
            shards[_shard(name, SHARDS)][0].add(name)
        for alias, canonical in state.aliases.items():
            shards[_shard(alias, SHARDS)][1][alias] = canonical
        for key in _ROW_FIELDS:
            for row in getattr(state, key):
                shards[_shard(row[0], SHARDS)][2][key].add(row)
        records = [_shard_record(*shard) for shard in shards]
    else:
        # What came or changed, by shard (each difference taken once), and the shards of what went.
        added: dict[int, tuple[set[str], set[str], dict[str, set[tuple]]]] = {}

        def bucket(i: int) -> tuple[set[str], set[str], dict[str, set[tuple]]]:
            return added.setdefault(i, (set(), set(), {key: set() for key in _ROW_FIELDS}))

        changed = {_shard(n, SHARDS) for n in previous.names - state.names}
        for name in state.names - previous.names:
            bucket(_shard(name, SHARDS))[0].add(name)
        for alias, _ in state.aliases.items() ^ previous.aliases.items():
            bucket(_shard(alias, SHARDS))[1].add(alias)
        for key in _ROW_FIELDS:
            now, before = getattr(state, key), getattr(previous, key)
            changed |= {_shard(row[0], SHARDS) for row in before - now}
            for row in now - before:
                bucket(_shard(row[0], SHARDS))[2][key].add(row)
        records = [base.get(k) or {} for k in _shard_keys(SHARDS)]
        for i in changed | set(added):
            # The shard's elements now: its recorded ones still in the state, and its new ones.
            old, (names, aliases_in, rows) = records[i], added.get(i) or (set(), set(), {})
            names = names | {n for n in old.get("names", ()) if n in state.names}
            keys = aliases_in | set(old.get("aliases", {}))
            aliases = {a: state.aliases[a] for a in keys if a in state.aliases}
            kept = {key: {tuple(r) for r in old.get(key, ()) if tuple(r) in getattr(state, key)} | rows.get(key, set())
                    for key in _ROW_FIELDS}
            records[i] = _shard_record(names, aliases, kept)
    head = {"rules": RULES, "shards": SHARDS, **({"manual": state.manual} if state.manual is not None else {})}
    return {HEAD_RECORD: head, **{k: r for k, r in zip(_shard_keys(SHARDS), records) if r}}


async def _read_records(meta: BaseKVStorage) -> dict[str, Any]:
    """Every record holding the derived state, by key (absent ones left out)."""
    keys = [STATE_RECORD, HEAD_RECORD, *_shard_keys(SHARDS)]
    found = dict(zip(keys, await meta.get_by_ids(keys)))
    count = (found[HEAD_RECORD] or {}).get("shards", SHARDS)
    if count != SHARDS:  # written with another shard count
        keys = _shard_keys(count)
        found.update(zip(keys, await meta.get_by_ids(keys)))
    return {k: r for k, r in found.items() if r is not None}


async def forget_derived_state(meta: BaseKVStorage) -> None:
    """A write without resolution leaves the derived state stale: drop it, so that turning
    resolution on again resolves the whole working dir afresh (manual decisions stay)."""
    records = await _read_records(meta)
    if records:
        await meta.delete(list(records))


class EntityResolution:
    """Runs resolution over the stores' contracts: ``graph`` (nodes by canonical name),
    ``meta`` (the records above) and ``read_extractions`` (recorded extractions,
    this write's included)."""

    def __init__(self, *, graph: BaseGraphStorage, meta: BaseKVStorage, read_extractions: ExtractionReader,
                 all_chunk_ids: Callable[[], Awaitable[list[str]]], settings: ResolutionSettings,
                 llm: Optional[LLMCall] = None,
                 embed: Optional[EmbedFunc] = None) -> None:
        self.graph = graph
        self.meta = meta
        self.read_extractions = read_extractions
        self.all_chunk_ids = all_chunk_ids
        self.settings = settings
        self.llm = llm
        self._kept = _KEPT.get(meta)
        self.embed = embed  # embedding blocking on: the embedding function

    async def state(self) -> Optional[ResolutionState]:
        return ResolutionState.from_stored(joined_state(await _read_records(self.meta)))

    async def aliases(self) -> AliasMap:
        state = await self.state()
        return dict(state.aliases) if state else {}

    async def manual(self) -> ManualDecisions:
        return ManualDecisions.from_stored(await self.meta.get_by_id(MANUAL_RECORD))

    async def save_manual(self, manual: ManualDecisions) -> None:
        await self.meta.upsert({MANUAL_RECORD: manual.to_stored()})

    def _index(self, before: set[str], names: set[str], ahead: Optional["IndexedAhead"] = None) -> NameIndex:
        """The blocking index over ``names``: the one ``ahead`` brought up from ``before`` while
        the names arrived, or the one this process kept from the last write to these stores,
        brought up to date, or a new one. Without a model to ask, pairs that only a model
        could settle are not looked for. (Which names an index holds is all its lookups
        depend on, not the order they came in.)"""
        if ahead is not None and ahead.before == before and ahead.index.loose == self.loose:
            kept = ahead.index
        else:
            kept = self.kept_index(before) or NameIndex(before, loose=self.loose)
        self._kept.index = kept
        kept.update(names - kept.names, kept.names - names)
        return kept

    def kept_index(self, before: set[str]) -> Optional[NameIndex]:
        """The blocking index this process kept from the last write to these stores, if it
        holds ``before`` (and blocks as this pass does): a pass brings it up to date, and a
        lookup process starts from a copy of it."""
        kept = self._kept.index
        return kept if kept is not None and kept.loose == self.loose and kept.names == before else None

    def take_kept_index(self, before: set[str]) -> Optional[NameIndex]:
        """:meth:`kept_index`, no longer kept: it is brought up in place in a thread, which a
        stopped write does not stop, so no later write may start from it until the pass that
        uses it keeps it again (:meth:`_index`)."""
        kept = self.kept_index(before)
        if kept is not None:
            self._kept.index = None
        return kept

    async def blocking_base(self) -> set[str]:
        """The names a pass starts its blocking index from: the recorded ones (none on a
        first pass or over a record of other rules, as :meth:`resolve` reads them)."""
        recorded = joined_state(await _read_records(self.meta))
        state = ResolutionState.from_stored(recorded)
        return state.names if state is not None and recorded.get("rules") == RULES else set()

    def blocking_ahead(self, chunks: int) -> Optional["BlockingAhead"]:
        """Blocking for the names of a write of ``chunks`` chunks as its extractions arrive
        (hand its result to :meth:`resolve`); None for a write too small to gain by it."""
        return BlockingAhead(self) if chunks >= LOOKUP_PROCESS_CHUNKS else None

    @property
    def loose(self) -> bool:
        """Whether blocking also finds the pairs only a model can settle (a model is asked)."""
        return self.llm is not None

    # ----------------------------------------------------------------- profiles

    async def _profiles(self, names: set[str], aliases: AliasMap) -> dict[str, NameProfile]:
        """Profiles of ``names`` from every chunk of their current nodes (the graph is
        grouped by ``aliases`` at this point): kept ones while their node lists the chunks
        they were read from, the others read."""
        node_of = {n: aliases.get(n, n) for n in names}
        order = sorted(set(node_of.values()))
        sources = {node: str(found.get("source_id") or "")
                   for node, found in zip(order, await self.graph.get_nodes_batch(order)) if found}
        kept = self._kept.profiles
        profiles: dict[str, NameProfile] = {}
        for name, node in node_of.items():
            known = kept.get(name)
            if known is not None and known[0] == node and known[1] == sources.get(node):
                profiles[name] = known[2]
        need = names - set(profiles)
        if need:
            chunk_ids = sorted({c for node in {node_of[n] for n in need} for c in _split_ids(sources.get(node))})
            found = {c: e for c, e in zip(chunk_ids, await self.read_extractions(chunk_ids)) if e}
            read = await asyncio.to_thread(name_profiles, found, need)
            kept.update((n, (node_of[n], sources[node_of[n]], p)) for n, p in read.items())
            profiles.update(read)
        return profiles

    def _forget(self, touched: set[str], records: dict[str, Any]) -> bool:
        """Drop what is kept of the ``touched`` names, and every vector when ``records`` (the
        derived state read at the start of a pass) are not the ones the last pass left
        (until this pass has written its own, no other trusts them). Returns whether they are."""
        kept = self._kept
        ours = kept.records is not None and kept.records == records
        if not ours:
            kept.vectors = {}
        for name in touched:
            kept.profiles.pop(name, None)
            kept.vectors.pop(name, None)
        kept.records = None
        return ours

    # ----------------------------------------------------------------- the pass

    async def resolve(self, added: dict[str, ChunkExtraction], removed: dict[str, ChunkExtraction],
                      ask_all: bool = False,
                      ahead: Optional[Callable[[], Awaitable[Optional[NamesLookedUp]]]] = None,
                      indexed: Optional[Callable[[], Awaitable[Optional[IndexedAhead]]]] = None) -> Resolution:
        """Decide again every pair touching a name the ``added`` or ``removed`` chunks
        mention, regroup, and report which names moved to another node. ``ask_all``: the
        judge asks every pending pair, whatever its budget. ``ahead``: gives the names looked
        up while ``added`` arrived, asked for once this pass's own index is built (used if
        they were looked up from the names this pass starts from). ``indexed``: gives the
        blocking index and the claims of ``added`` made while they arrived (:class:`IndexedAhead`)."""
        started = time.perf_counter()
        records = await _read_records(self.meta)
        recorded = joined_state(records)
        state = ResolutionState.from_stored(recorded)
        manual = await self.manual()
        present = {n for extraction in added.values() for n in raw_names(extraction)}
        unresolved: list[str] = []
        # The records as the last pass of this process wrote them from ``state``, of these rules:
        # the shards the pass leaves as they were need not be built again.
        written_from: Optional[ResolutionState] = state
        if state is None or recorded.get("rules") != RULES:
            written_from = None  # type: ignore[union-attr]
            # First pass on this working dir, or a record of other rules: every recorded name,
            # from the nodes as they are (grouped by the old map).
            state = ResolutionState(aliases=state.aliases if state else {})
            everything = await self.all_chunk_ids()
            for chunk_id, extraction in zip(everything, await self.read_extractions(everything)):
                if extraction:
                    present |= raw_names(extraction)
                    if chunk_id not in added:  # the added chunks' claims follow
                        state.claims |= {(n, c, chunk_id) for n, c in chunk_claims(extraction)}
            unresolved = sorted(set(everything) - set(added))
        claims = {c for c in state.claims if c[2] not in removed and c[2] not in added}
        ahead_index = await indexed() if indexed is not None else None
        claims |= {(n, c, chunk_id) for chunk_id, extraction in added.items()
                   for n, c in (ahead_index.claims_of(chunk_id, extraction) if ahead_index else chunk_claims(extraction))}
        # A name of a removed chunk, or of a manual decision, may be gone: its profile tells.
        maybe = {n for extraction in removed.values() for n in raw_names(extraction)}
        maybe = (maybe | set(manual.merges) | {n for pair in manual.never for n in pair}) - present
        previous = dict(state.aliases)
        touched = present | maybe
        if not self._forget(touched, records):
            written_from = None
        profiles = await self._profiles(maybe, previous) if maybe else {}
        present |= set(profiles)
        names = (state.names - touched) | present
        index = self._index(state.names, names, ahead_index)
        looked_up = await ahead() if ahead is not None else None
        if looked_up is not None and (looked_up.before != state.names or looked_up.loose != self.loose):
            looked_up = None
        candidates = _candidate_pairs(present, claims, index, looked_up)
        if self.embed is not None:
            similar = await self._similar(present, names, profiles, previous)
            # Pairs not met by blocking, or met only loosely with no relation of their names.
            for pair in sorted(p for p in similar if candidates.get(p, UNWORKED) == UNWORKED):
                relation = name_relation(*pair) or "similar"
                if self.llm is not None or relation not in UNSETTLED_RELATIONS:
                    candidates[pair] = relation
        missing = {n for pair in candidates for n in pair} - set(profiles)
        if missing:
            profiles.update(await self._profiles(missing, previous))
        _recorded_claims(profiles, claims)
        # Only decisions the pass uses are kept (a merge, a question, a part, a person's pair):
        # tens of thousands of distinct pairs kept to its end would outlive the collector's
        # young generations and bring on full collections over the whole process. Most pairs
        # of loose blocking stop at ``decide_pair``'s first check, so they are not built.
        checked = 0
        decisions: list[PairDecision] = []
        threshold, ask_threshold = self.settings.threshold, self.settings.ask_threshold
        # In any order: what is kept is used as sets, and the judge sorts its questions.
        for (a, b), relation in candidates.items():
            pa, pb = profiles.get(a), profiles.get(b)
            if pa is None or pb is None:
                continue
            checked += 1
            if cannot_be_asked(pa, pb, relation, ask_threshold):
                continue
            if relation == UNWORKED:  # worth asking if its names relate at all: do they?
                worked = name_relation(a, b)
                if worked is None or cannot_be_asked(pa, pb, worked, ask_threshold):
                    continue
                relation = worked
            decision = decide_pair(pa, pb, relation, threshold=threshold, ask_threshold=ask_threshold)
            if decision.verdict != "distinct" or decision.part or decision.if_person:
                decisions.append(decision)
        verdicts: dict[tuple[str, str], bool] = {}
        judged = {"pairs_asked": 0}
        # Pending pairs of untouched names wait on (a write without a model keeps them too);
        # those of touched names were decided again.
        pending = {p for p in state.pending if p[0] in names and p[1] in names
                   and p[0] not in touched and p[1] not in touched}
        if self.llm is not None:
            verdicts, judged, pending = await self._judge(decisions, pending, profiles, previous, len(added), ask_all)
        # Verdicts on pending pairs of untouched names count too: ``_redecided`` keeps them.
        accepted = {(d.a, d.b) for d in decisions if d.verdict == "merge"} | {p for p, yes in verdicts.items() if yes}
        # Changed: names that came or went, and the ends of every pair that came or went.
        changed = {n for n in touched if (n in names) != (n in state.names)}
        pairs = _redecided(state.pairs, accepted, touched, changed)
        parts = _redecided(state.parts, {(d.a, d.b) for d in decisions if d.part}, touched, changed)
        person_pairs = _redecided(state.person_pairs, {(d.a, d.b) for d in decisions if d.if_person}, touched, changed)
        sharing = _redecided(state.sharing, {(d.a, d.b) for d in decisions if d.shares}, touched, changed)
        covering = _redecided(state.covering, {(d.a, d.b) for d in decisions if d.covers}, touched, changed)
        fingerprint = manual.fingerprint()
        if state.manual != fingerprint:  # a first pass, or a map grouped with other decisions
            aliases = group_names(names, pairs, manual, parts, person_pairs, sharing, covering)
        else:
            aliases = regroup(names, pairs, manual, parts, person_pairs, previous=previous, changed=changed,
                              sharing=sharing, covering=covering)
        new_state = ResolutionState(names=names, pairs=pairs, aliases=aliases, parts=parts, person_pairs=person_pairs,
                                    sharing=sharing, covering=covering, manual=fingerprint, claims=claims,
                                    pending=pending)
        moved = {n for n in set(previous) | set(aliases) if previous.get(n, n) != aliases.get(n, n)}
        written = state_records(new_state, written_from, records if written_from is not None else None)
        changed_records = {k: r for k, r in written.items() if records.get(k) != r}
        if changed_records:
            await self.meta.upsert(changed_records)
        gone = [k for k in records if k not in written]  # emptied shards, an earlier version's record
        if gone:
            await self.meta.delete(gone)
        self._kept.records = written
        stats = {"names": len(names), "aliases": len(aliases), "pairs_checked": checked,
                 **judged, "names_moved": len(moved),
                 "seconds": round(time.perf_counter() - started, 3)}
        logger.info("Entity resolution: %s", stats)
        return Resolution(state=new_state, previous=previous, moved=moved, stats=stats, unresolved=unresolved)

    async def _judge(self, decisions: list[PairDecision], waiting: set[tuple[str, str]],
                     profiles: dict[str, NameProfile], aliases: AliasMap, added: int, ask_all: bool
                     ) -> tuple[dict[tuple[str, str], bool], dict[str, int], set[tuple[str, str]]]:
        """The model's verdicts on the pairs it may settle, the counts, and the pairs left
        pending. Which pairs qualify is each pair's own decision (``verdict == "ask"``), so
        once nothing is pending the accepted pairs are those of one write of everything,
        however the documents were batched. Pending pairs of untouched names (decided as
        they are now) go first, then this write's, strongest first; at most a share of the
        write's extraction calls (one per added chunk), one call at least."""
        ordered = sorted(waiting)
        asking = [(d.a, d.b) for d in sorted(decisions, key=lambda d: (-d.score, d.a, d.b)) if d.verdict == "ask"]
        budget = None if ask_all else max(1, math.ceil(self.settings.judge_share * added))
        room = ordered if budget is None else ordered[:budget * self.settings.batch_size]
        missing = {n for pair in room for n in pair} - set(profiles)
        if missing:
            profiles.update(await self._profiles(missing, aliases))
        order = [p for p in room if p[0] in profiles and p[1] in profiles] + asking
        verdicts, judged = await Judge(self.llm, self.meta, self.settings.batch_size).settle(  # type: ignore[arg-type]
            order, profiles, budget)
        pending = (waiting | set(asking)) - set(verdicts)
        return verdicts, {**judged, "pairs_pending": len(pending)}, pending

    async def _similar(self, present: set[str], names: set[str], profiles: dict[str, NameProfile],
                       aliases: AliasMap) -> set[tuple[str, str]]:
        """Embedding blocking: pairs of a present name and any name whose vectors of name plus
        sample description are close. Vectors of touched names are computed again; the others
        are kept from this process's last write (see :meth:`_forget`)."""
        vectors = {n: v for n, v in self._kept.vectors.items() if n in names}
        need = sorted(names - set(vectors))
        if need:
            unknown = set(need) - set(profiles)
            found = {**profiles, **(await self._profiles(unknown, aliases) if unknown else {})}
            texts = {n: f"{n}: {' '.join(found[n].sample.split())[:300]}" if n in found else n for n in need}
            order = sorted(texts)
            batches = [order[i:i + 256] for i in range(0, len(order), 256)]
            rows = await asyncio.gather(*(self.embed([texts[n] for n in b]) for b in batches))  # type: ignore[misc]
            for name, row in zip(order, (r for batch in rows for r in batch)):
                norm = float((row * row).sum()) ** 0.5 or 1.0
                vectors[name] = (texts[name], row / norm)
        self._kept.vectors = vectors
        return await asyncio.to_thread(similar_pairs, {n: v for n, (_, v) in vectors.items()}, present,
                                       self.settings.embedding_threshold)

    async def moved_chunks(self, resolution: Resolution) -> dict[str, ChunkExtraction]:
        """The extractions of every chunk mentioning a name that moved: regrouped, they
        rebuild both the node a name left and the node it joined."""
        if not resolution.moved and not resolution.unresolved:
            return {}
        nodes = sorted({resolution.previous.get(n, n) for n in resolution.moved})
        chunk_ids = sorted({c for node in await self.graph.get_nodes_batch(nodes) if node
                            for c in _split_ids(node.get("source_id"))} | set(resolution.unresolved))
        unresolved = set(resolution.unresolved)
        return {c: e for c, e in zip(chunk_ids, await self.read_extractions(chunk_ids))
                if e and (c in unresolved or raw_names(e) & resolution.moved)}


@dataclass
class NamesLookedUp:
    """Candidates of some of a write's names found before its pass (:class:`BlockingAhead`):
    each name's against the names ``before`` (those the pass starts from) and the write's
    names that came before it. A pair's membership and relation depend on its two names only and
    it is found from either (see :class:`NameIndex`), so a pair of two names looked up here
    is found from the later one, and one with a name the pass looks up from that name:
    together, what looking every name up in the pass's index finds."""

    before: set[str]
    loose: bool
    found: dict[str, dict[str, str]] = field(default_factory=dict)

    def pairs(self, looked_up: Iterable[str], names: set[str]) -> dict[tuple[str, str], str]:
        """The pairs found from ``looked_up`` whose other name is still one of ``names``."""
        pairs: dict[tuple[str, str], str] = {}
        for name in looked_up:
            for other, relation in self.found[name].items():
                if other in names:
                    pairs[(min(name, other), max(name, other))] = relation
        return pairs


@dataclass
class IndexedAhead:
    """What a pass would start by making from a write's extractions, made while they arrived
    (:meth:`BlockingAhead.index`): its blocking index, brought up from the names ``before`` by
    the names of the chunks extracted so far, and those chunks' claims, by chunk (with the
    extraction they were read from)."""

    before: set[str]
    index: NameIndex
    claims: dict[str, tuple[ChunkExtraction, set[tuple[str, str]]]] = field(default_factory=dict)

    def add(self, extractions: list[tuple[str, ChunkExtraction]]) -> None:
        """Index the names of ``extractions`` and read their claims (in a worker thread: nothing
        else reads this meanwhile)."""
        self.index.update({n for _, extraction in extractions for n in raw_names(extraction)} - self.index.names, ())
        for chunk_id, extraction in extractions:
            self.claims[chunk_id] = (extraction, chunk_claims(extraction))

    def claims_of(self, chunk_id: str, extraction: ChunkExtraction) -> set[tuple[str, str]]:
        """``chunk_claims(extraction)``, as read ahead if it was read from this extraction."""
        known = self.claims.get(chunk_id)
        return known[1] if known is not None and known[0] is extraction else chunk_claims(extraction)


class BlockingAhead:
    """Looks a large write's names up as its extractions arrive, in a second process
    (``lookup_worker``, at a lower CPU priority than the model's calls and the event loop:
    it takes the cycles they leave on the other core, and the whole core once extraction is
    over and the merge runs here). ``run`` returns the names answered once ``close`` was
    called: the pass does not wait for the rest (a busy machine may leave the process little
    CPU), it looks them up itself, as every name if the process could not start or failed.

    ``index`` meanwhile brings the pass's own blocking index up to the names as they arrive and
    reads their chunks' claims, in a thread of this process, batch by batch (the event loop
    stays free for the model's answers); ``all_in`` says no more come."""

    def __init__(self, resolution: EntityResolution) -> None:
        self._resolution = resolution
        self._waiting: list[str] = []
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self._base: Optional["asyncio.Future[set[str]]"] = None
        self._to_index: list[tuple[str, ChunkExtraction]] = []
        self._index_wake = asyncio.Event()
        self._all_in = False
        # The lookup process starts from a copy of the kept index that ``index`` then brings up
        # in place in a thread: ``index`` adds nothing until ``run`` has taken that copy.
        self._running = False
        self._copied = asyncio.Event()

    def on_extracted(self, chunk_id: str, extraction: ChunkExtraction) -> None:
        self._waiting.extend(raw_names(extraction))
        self._wake.set()
        self._to_index.append((chunk_id, extraction))
        self._index_wake.set()

    def all_in(self) -> None:
        """No more extractions come: :meth:`index` indexes what is left and returns."""
        self._all_in = True
        self._index_wake.set()

    async def _before(self) -> set[str]:
        """The names the pass starts from (read once for both ``run`` and ``index``)."""
        if self._base is None:
            self._base = asyncio.ensure_future(self._resolution.blocking_base())
        return set(await asyncio.shield(self._base))

    async def index(self) -> IndexedAhead:
        """The pass's index and claims over the extractions that came until :meth:`all_in`."""
        before = await self._before()
        if self._running:
            await self._copied.wait()
        kept = self._resolution.take_kept_index(before)
        ahead = IndexedAhead(before, kept if kept is not None else
                             await asyncio.to_thread(NameIndex, before, self._resolution.loose))
        while True:
            batch, self._to_index = self._to_index, []
            if batch:
                await asyncio.to_thread(ahead.add, batch)
            elif self._all_in:
                return ahead
            else:
                await self._index_wake.wait()
                self._index_wake.clear()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()

    async def run(self) -> Optional[NamesLookedUp]:
        self._running = True
        worker: Optional[LookupProcess] = None
        sent: set[str] = set()
        try:
            looked_up = NamesLookedUp(await self._before(), self._resolution.loose)
            try:
                worker = await LookupProcess.start(
                    self._resolution.kept_index(looked_up.before) or sorted(looked_up.before), looked_up.loose)
            finally:
                self._copied.set()
            while not self._closed.is_set():
                if not self._waiting:
                    await self._wake.wait()
                    self._wake.clear()
                new = [n for n in dict.fromkeys(self._waiting) if n not in sent]
                new, self._waiting = new[:LOOKUP_BATCH], new[LOOKUP_BATCH:]
                if not new or self._closed.is_set():
                    continue
                sent.update(new)
                answer = asyncio.ensure_future(worker.look_up(new))
                closing = asyncio.ensure_future(self._closed.wait())
                try:
                    await asyncio.wait({answer, closing}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    closing.cancel()
                if not answer.done():  # closed first: these names are left to the pass
                    answer.cancel()
                    break
                looked_up.found.update(answer.result())
            return looked_up
        except (OSError, EOFError, asyncio.IncompleteReadError, pickle.UnpicklingError) as exc:
            logger.warning("Entity resolution looks its names up itself: the lookup process failed (%s)",
                           type(exc).__name__)
            return None
        finally:
            self._copied.set()  # also when cancelled or failed before the process started
            if worker is not None:
                await worker.aclose()


async def duplicate_groups(extractions: dict[str, ChunkExtraction], state: Optional[ResolutionState],
                           manual: ManualDecisions, settings: ResolutionSettings) -> list[dict[str, Any]]:
    """Every group of names the engine merged or found worth a look, for a person to review:
    each with its names, the node each is in now, and every candidate pair's evidence
    (a read of all extractions; computes nothing it stores)."""

    def compute() -> list[dict[str, Any]]:
        names = {n for extraction in extractions.values() for n in raw_names(extraction)}
        profiles = name_profiles(extractions, names)
        index = NameIndex(profiles, loose=True)
        aliases = state.aliases if state else {}
        accepted = state.pairs if state else set()
        claims = {(n, c, chunk_id) for chunk_id, extraction in extractions.items() for n, c in chunk_claims(extraction)}
        candidates: dict[tuple[str, str], str] = {}
        for pair, relation in _candidate_pairs(set(profiles), claims, index).items():  # every pair is shown
            worked = name_relation(*pair) if relation == UNWORKED else relation
            if worked is not None:
                candidates[pair] = worked
        _recorded_claims(profiles, claims)
        decisions = {pair: decide_pair(profiles[pair[0]], profiles[pair[1]], relation, threshold=settings.threshold,
                                       ask_threshold=settings.ask_threshold)
                     for pair, relation in sorted(candidates.items()) if pair[0] in profiles and pair[1] in profiles}
        shown = [d for d in decisions.values()
                 if d.verdict != "distinct" or aliases.get(d.a, d.a) == aliases.get(d.b, d.b)]
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        for d in shown:
            parent[find(d.b)] = find(d.a)
        for alias, canonical in aliases.items():
            parent[find(alias)] = find(canonical)
        groups: dict[str, set[str]] = {}
        for name in list(parent):
            groups.setdefault(find(name), set()).add(name)
        report = []
        for members in groups.values():
            pairs = sorted((d for d in shown if d.a in members), key=lambda d: (-d.score, d.a, d.b))
            report.append({
                "names": sorted(members),
                "node": {n: aliases.get(n, n) for n in sorted(members)},
                "pairs": [{"a": d.a, "b": d.b, "relation": d.relation, "score": d.score,
                           "verdict": "accepted" if (d.a, d.b) in accepted else d.verdict,
                           "never": (d.a, d.b) in manual.never, **d.evidence} for d in pairs],
            })
        return sorted(report, key=lambda g: (-len(g["names"]), g["names"]))

    return await asyncio.to_thread(compute)
