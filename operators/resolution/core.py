"""Groups: manual decisions, the derived state, grouping accepted pairs into an alias
map, and regrouping exactly what a write changed."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Collection, Iterable, Mapping, Optional


from .evidence import COMPATIBLE
from .keys import NEVER_ALIKE, TOKEN, designation, gender, look_alike, name_key, name_relation, normal_name
from .words import ARTICLES, DESCRIPTIVE, HONORIFICS


# alias -> canonical name (canonical names left out)
AliasMap = dict[str, str]


# --------------------------------------------------------------------------- groups


@dataclass
class ManualDecisions:
    """The user's decisions, kept apart from the derived ones so they survive any change:
    ``merges`` maps a name to the name it must be merged into; ``never`` holds pairs that
    must not share a node."""

    merges: dict[str, str] = field(default_factory=dict)
    never: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def from_stored(cls, record: Optional[Mapping[str, Any]]) -> "ManualDecisions":
        record = record or {}
        return cls(merges=dict(record.get("merges") or {}),
                   never={tuple(sorted(p)) for p in record.get("never") or [] if len(p) == 2})  # type: ignore[misc]

    def to_stored(self) -> dict[str, Any]:
        return {"merges": dict(sorted(self.merges.items())), "never": sorted(list(p) for p in self.never)}

    def fingerprint(self) -> str:
        """Names these decisions in the derived record, so a write sees whether the alias map
        it starts from was grouped with them."""
        return hashlib.sha256(json.dumps(self.to_stored()).encode("utf-8")).hexdigest()[:24]

    def merge(self, names: Iterable[str], into: str) -> None:
        for name in names:
            if name != into:
                self.merges[name] = into
                self.never.discard(tuple(sorted((name, into))))  # type: ignore[arg-type]

    def keep_apart(self, a: str, b: str) -> None:
        self.never.add(tuple(sorted((a, b))))  # type: ignore[arg-type]
        for x, y in ((a, b), (b, a)):
            if self.merges.get(x) == y:
                del self.merges[x]

    def undo(self, names: Collection[str]) -> dict[str, Any]:
        """Drop every decision naming one of ``names`` (a merge from or into it, a pair kept
        apart with it); what was dropped, in the stored shape."""
        merges = {a: b for a, b in self.merges.items() if a in names or b in names}
        never = {p for p in self.never if p[0] in names or p[1] in names}
        for name in merges:
            del self.merges[name]
        self.never -= never
        return {"merges": dict(sorted(merges.items())), "never": sorted(list(p) for p in never)}


# The version of the rules the derived record was decided by: a record of other rules is
# decided again in full by the next write (its decisions would not be a fresh index's).
RULES = 22


@dataclass
class ResolutionState:
    """Derived resolution state of a working dir: every name the extractions mention, the
    candidate pairs accepted, and the alias map they give. A pure function of the recorded
    extractions, the manual decisions and the cached model verdicts."""

    names: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    aliases: AliasMap = field(default_factory=dict)
    # Candidate pairs of a name and a fuller one it is part of (``PairDecision.part``).
    parts: set[tuple[str, str]] = field(default_factory=set)
    # Pairs accepted if their group is a person (``PairDecision.if_person``).
    person_pairs: set[tuple[str, str]] = field(default_factory=set)
    # Parts and the fuller names one of the part's texts names (``PairDecision.shares``), and
    # those every one of its texts names (``PairDecision.covers``).
    sharing: set[tuple[str, str]] = field(default_factory=set)
    covering: set[tuple[str, str]] = field(default_factory=set)
    # The fingerprint of the manual decisions ``aliases`` was grouped with (None: unknown).
    manual: Optional[str] = None
    # What descriptions state names are: (name, claim key, chunk id), so a name another
    # chunk is said to be is found from either side (:func:`chunk_claims`).
    claims: set[tuple[str, str, str]] = field(default_factory=set)
    # Pairs a model may settle (``PairDecision.verdict == "ask"``) that no write has asked
    # yet for want of judge calls: the next writes, or ``resolve_pending``, ask them first.
    pending: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def from_stored(cls, record: Optional[Mapping[str, Any]]) -> Optional["ResolutionState"]:
        if not record:
            return None

        def pairs(key: str) -> set[tuple[str, str]]:
            return {tuple(p) for p in record.get(key) or []}  # type: ignore[misc]

        return cls(names=set(record.get("names") or []), pairs=pairs("pairs"), aliases=dict(record.get("aliases") or {}),
                   parts=pairs("parts"), person_pairs=pairs("person_pairs"), sharing=pairs("sharing"),
                   covering=pairs("covering"), manual=record.get("manual"),
                   claims={tuple(c) for c in record.get("claims") or []},  # type: ignore[misc]
                   pending=pairs("pending"))


def _completeness(name: str) -> tuple:
    """Sort key of the name a group keeps: a name rather than a designation, most
    identifying words, then a plain name (no honorific or article around it), then the
    shortest, then alphabetical."""
    key = name_key(name)
    return (designation(name) is not None, -len(key), name != " ".join(key), len(name), name)


def _titled(name: str) -> bool:
    """A title before a name (``MR. EDWIN HALE``): the name is a person's."""
    tokens = [t for t in TOKEN.findall(normal_name(name)) if t not in ARTICLES and t not in DESCRIPTIVE]
    return len(tokens) > 1 and tokens[0] in HONORIFICS


def group_names(names: set[str], pairs: set[tuple[str, str]], manual: ManualDecisions,
                parts: Iterable[tuple[str, str]] = (), person_pairs: Iterable[tuple[str, str]] = (),
                sharing: Collection[tuple[str, str]] = (), covering: Collection[tuple[str, str]] = ()) -> AliasMap:
    """The alias map (alias -> canonical, canonical names left out) that accepted ``pairs``
    and ``manual`` decisions give over ``names``.

    A name whose accepted partners, or the fuller names it is part of (``parts``, accepted
    or not), cannot all be one thing is ambiguous and stays alone; where every text of a
    part names one fuller name it is accepted with (``covering``), only the fuller names one
    of its texts names (``sharing``) count;
    groups never join names of conflicting gender or a never-merge pair. Manual merges go
    first and name their group; the rest follow in sorted order, so the result does not
    depend on the order the pairs were found in.
    """
    return _grouped(names, _Links(names, pairs, manual.never, parts, sharing=sharing, covering=covering), manual, pairs,
                    person_pairs)


class _Links:
    """The accepted pairs and the parts over ``names`` as grouping reads them: whether two
    names fit, and whether a name is ambiguous (decided when first asked). ``of``: the only
    names whose ambiguity will be asked, when a regrouping asks about few."""

    def __init__(self, names: set[str], pairs: set[tuple[str, str]], never: set[tuple[str, str]],
                 parts: Iterable[tuple[str, str]], of: Optional[set[str]] = None,
                 sharing: Collection[tuple[str, str]] = (), covering: Collection[tuple[str, str]] = ()) -> None:
        self.names, self.pairs, self.never = names, pairs, never
        self.sharing, self.covering = sharing, covering
        self.partners: dict[str, set[str]] = {}
        for a, b in chain((p for p in pairs if p not in never), parts):
            if a in names and b in names and (of is None or a in of or b in of):
                self.partners.setdefault(a, set()).add(b)
                self.partners.setdefault(b, set()).add(a)
        self._unsure: dict[str, bool] = {}
        self._covered: dict[str, list[str]] = {}

    def compatible(self, x: str, y: str) -> bool:
        pair = (min(x, y), max(x, y))
        accepted = pair in self.pairs and pair not in self.never and x in self.names and y in self.names
        return accepted or name_relation(x, y) in COMPATIBLE

    def look_alike(self, x: str, y: str) -> bool:
        """Names that never share a group by rules: a hard :func:`look_alike`, or a qualifier
        no accepted pair (a model's verdict) settled."""
        told = look_alike(x, y)
        return told in NEVER_ALIKE or bool(told) and (min(x, y), max(x, y)) not in self.pairs

    def unsure(self, name: str) -> bool:
        """Fuller names ``name`` could be part of, that cannot be one thing (``BRANT``:
        ``TOM BRANT``, ``ANNA BRANT``)."""
        found = self._unsure.get(name)
        if found is None:
            partners = self.partners.get(name, ())
            key = name_key(name)
            found = designation(name)
            if found:  # who is said to be it, but for parts of one of them and its head
                said = [p for p in partners if name_key(p) != found[1]]
                fuller = sorted(p for p in said if not any(set(name_key(p)) < set(name_key(q)) for q in said))
            else:  # a designation's ambiguity is its own, unless this is its head
                # The name spelt another way (a transliteration: KARIM / KAREEM) is no other
                # name it could stand for: beside a second name it is accepted with (a title in
                # another language), it makes the name no less sure. Grouping still joins only
                # names that fit each other.
                fuller = sorted(p for p in partners if _at_least_as_full(name_key(p), key)
                                and (not designation(p) or designation(p)[1] == key)  # type: ignore[index]
                                and name_relation(name, p) != "spelling")
                # Every text of the part names one fuller name it is accepted with (MORVEN, in the
                # texts of ILSA MORVEN): there it is that one, and another fuller name counts only
                # where one of its texts names it too (TOMAS MORVEN, named elsewhere, does not).
                covering = [p for p in fuller if _pair(name, p) in self.covering and _pair(name, p) in self.pairs]
                if covering:
                    self._covered[name] = covering
                    fuller = [p for p in fuller if _pair(name, p) in self.sharing]
            found = self._unsure[name] = any(not self.compatible(p, q) for i, p in enumerate(fuller)
                                             for q in fuller[i + 1:])
        return found

    def elsewhere(self, x: str, y: str) -> bool:
        """Whether an accepted pair joins a part that is, in its own texts, one fuller name
        (see :meth:`unsure`) to a fuller name none of those texts names and that cannot be
        that one: another bearer (NELL, in texts naming NELL ASHCROFT, is no NELL PARGETER
        named elsewhere; DR. ASHCROFT may still be NELL ASHCROFT)."""
        for part, other in ((x, y), (y, x)):
            self.unsure(part)
            covering = self._covered.get(part, ())
            if covering and _pair(x, y) not in self.sharing and _at_least_as_full(name_key(other), name_key(part)) \
                    and not all(self.compatible(other, p) for p in covering if p != other):
                return True
        return False


def _pair(x: str, y: str) -> tuple[str, str]:
    return (x, y) if x <= y else (y, x)


def _at_least_as_full(other: tuple[str, ...], key: tuple[str, ...]) -> bool:
    """Whether a partner's key ``other`` could be a fuller name of ``key``: as many words or
    more; between one-word keys (a script written without spaces: 北京大学, 北大), as many
    characters or more, so a name's own short form is no second fuller name it could be part of."""
    if len(other) == len(key) == 1:
        return len(other[0]) >= len(key[0])
    return len(other) >= len(key)


def _judged(a: str, b: str) -> tuple[str, ...]:
    """The names of an accepted pair whose ambiguity keeps them apart: a name said to be a
    designation is that one thing, however ambiguous a part of it is; a designation's head
    ("THE STEWARD") is not."""
    da, db = designation(a), designation(b)
    if not da and not db:
        return a, b
    return tuple(n for n, other in ((a, db), (b, da)) if designation(n) or other and other[1] == name_key(n))


def _grouped(names: set[str], links: _Links, manual: ManualDecisions, pairs: Iterable[tuple[str, str]],
             person_pairs: Iterable[tuple[str, str]]) -> AliasMap:
    """:func:`group_names`' groups of ``names``, joined along the manual merges, ``pairs``
    and ``person_pairs``."""
    never = manual.never
    edges = {p for p in pairs if p[0] in names and p[1] in names and p not in never}
    parent: dict[str, str] = {}
    members: dict[str, list[str]] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def union(x: str, y: str, forced: bool) -> None:
        rx, ry = find(x), find(y)
        if rx == ry:
            return
        left, right = members.get(rx, [rx]), members.get(ry, [ry])
        for p in left:
            for q in right:
                if (min(p, q), max(p, q)) in never:
                    return
                # One-word names are parts of the fuller ones (JAMES, MORROW: JAMES MORROW);
                # fuller names must fit each other (TOM BRANT is no ANNA BRANT).
                # A designation is like a part: its own ambiguity keeps it out of a wrong group.
                fuller = len(name_key(p)) > 1 and len(name_key(q)) > 1 and not (designation(p) or designation(q))
                if not forced and ((fuller and not links.compatible(p, q)) or links.look_alike(p, q)
                                   or gender(p) and gender(q) and gender(p) != gender(q)):
                    return
        parent[ry] = rx
        members[rx] = left + right
        members.pop(ry, None)

    targets = set()
    for name, into in sorted(manual.merges.items()):
        if name in names:
            union(into, name, forced=True)
            targets.add(into)
    for a, b in sorted(edges):
        if not any(links.unsure(n) for n in _judged(a, b)) and not links.elsewhere(a, b):
            union(a, b, forced=False)
    waiting = sorted(p for p in person_pairs if p[0] in names and p[1] in names and p not in never
                     and not links.unsure(p[0]) and not links.unsure(p[1]) and not links.elsewhere(*p))
    while waiting:  # until no group becomes a person
        left = [(a, b) for a, b in waiting
                if not any(_titled(n) for r in {find(a), find(b)} for n in members.get(r, [r]))]
        for a, b in sorted(set(waiting) - set(left)):
            union(a, b, forced=False)
        if len(left) == len(waiting):
            break
        waiting = left
    aliases: AliasMap = {}
    for group in members.values():
        chosen = min(group, key=lambda n: (n not in targets, _completeness(n)))
        for name in group:
            if name != chosen and name in names:
                aliases[name] = chosen
    return aliases


def regroup(names: set[str], pairs: set[tuple[str, str]], manual: ManualDecisions, parts: set[tuple[str, str]],
            person_pairs: set[tuple[str, str]], *, previous: AliasMap, changed: set[str],
            sharing: Collection[tuple[str, str]] = (), covering: Collection[tuple[str, str]] = ()) -> AliasMap:
    """What :func:`group_names` gives over these inputs, grouping again only the names a
    write could have moved. ``previous`` must be ``group_names`` of the inputs before the
    write, with the same ``manual`` decisions; ``changed`` every name that joined or left
    ``names`` or gained or lost a pair, a part, a person pair or a part's text facts
    (``sharing``, ``covering``).

    Groups only join names linked by pairs, person pairs and merges, so each connected
    component of those is grouped on its own, given which names are ambiguous. A name's
    ambiguity reads its partners (pairs and parts) and the pairs between them: it may have
    changed only for a changed name or a partner of one. A component holding none of those
    is a component of the inputs before, with the same inputs and the same ambiguous names:
    it keeps its previous map. The others are grouped again.
    """
    # Partners by a pair are in a changed name's component already; those by a part are not.
    unsettled = set(changed)
    for a, b in parts:  # a part lost has both ends changed already
        if a in changed:
            unsettled.add(b)
        elif b in changed:
            unsettled.add(a)
    joined: dict[str, list[str]] = {}
    for a, b in chain(pairs, person_pairs, manual.merges.items()):
        joined.setdefault(a, []).append(b)
        joined.setdefault(b, []).append(a)
    reached, stack = set(unsettled), list(unsettled)
    while stack:
        for other in joined.get(stack.pop(), ()):
            if other not in reached:
                reached.add(other)
                stack.append(other)

    def within(found: set[tuple[str, str]]) -> set[tuple[str, str]]:
        return {p for p in found if p[0] in reached}  # one end reached: both, in one component

    aliases = {n: c for n, c in previous.items() if n not in reached}
    links = _Links(names, pairs, manual.never, parts, of=reached, sharing=sharing, covering=covering)
    aliases.update(_grouped(names & reached, links, manual, within(pairs), within(person_pairs)))
    return aliases
