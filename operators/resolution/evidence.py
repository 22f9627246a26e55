"""What the extractions say about a name (its profile) and a candidate pair's decision."""
from __future__ import annotations

import math
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Iterator, Mapping, Optional

from graphrag.operators.names import fold_name
from graphrag.schema import ChunkExtraction

from .chinese import has_han, stated_names
from .english import (STOPWORDS, born_asides, claim_cues, cued_claims, description_claims, description_pronouns,
                      description_roles, gender_from_pronouns, is_english, opening_pronouns, plural_name, said_to_be,
                      written_in_lower_case)
from .keys import (NEVER_ALIKE, TOKEN, UNSETTLED_RELATIONS, UNWORKED, accented_key, designation, gender, key_of,
                   look_alike, name_key, normal_name, owned, relational, surface_variants)
from .words import ARTICLES, CORPORATE, HONORIFICS


_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
# The same words in a text that is ASCII once lowered: there a letter is one of a-z, and the
# narrower class scans faster than the Unicode one.
_ASCII_WORD = re.compile(r"[a-z]{3,}")
_NUMBER_WORDS = frozenset("TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN BOTH ALL".split())


# --------------------------------------------------------------------------- evidence


@dataclass
class NameProfile:
    """What the extractions say about one name (before resolution)."""

    name: str
    types: Counter = field(default_factory=Counter)
    words: Counter = field(default_factory=Counter)
    neighbours: set[str] = field(default_factory=set)
    chunks: set[str] = field(default_factory=set)
    descriptions: dict[str, str] = field(default_factory=dict)  # by chunk id
    # The descriptions of the relations the name is an end of: a name a model writes only in
    # relations ("Marten sold the works" as the text of MARTEN -> THE WORKS) is described there.
    relation_texts: list[str] = field(default_factory=list)
    # Those of the relations it is the source of: a model writes a relation's text with its
    # source as the subject ("She runs the workshop there" for a potter -> her studio).
    source_texts: list[str] = field(default_factory=list)

    @property
    def sample(self) -> str:
        """One description (the first chunk's), shown to a model or a person."""
        return self.descriptions[min(self.descriptions)] if self.descriptions else ""

    @cached_property
    def type(self) -> str:
        known = {t: n for t, n in self.types.items() if t and t != "UNKNOWN"}
        return min(known, key=lambda t: (-known[t], t)) if known else "UNKNOWN"

    @cached_property
    def norm(self) -> float:
        return math.sqrt(sum(v * v for v in self.words.values()))

    @cached_property
    def english(self) -> list[str]:
        """The descriptions the English rules read (:func:`.english.is_english`)."""
        return [text for text in self.descriptions.values() if is_english(text)]

    @cached_property
    def described(self) -> bool:
        """A description, not a name: the English descriptions write each of its words in
        lower case somewhere ("the lonely boy", "her father"), as no text writes a proper
        name. Two such names sharing words ("THE GIRL", "THE TALL YOUNG GIRL") need not be
        one thing."""
        english = self.english
        return bool(english) and all(written_in_lower_case(t.lower(), english) for t in set(name_key(self.name)))

    @cached_property
    def roles(self) -> set[str]:
        """What the descriptions say the name is: "jester", "dealer"."""
        return description_roles(self.name, self.english)

    @cached_property
    def text(self) -> str:
        """The descriptions in lower case (to look for a word cheaply)."""
        return "\n".join(self.descriptions.values()).lower()

    @cached_property
    def claims(self) -> set[str]:
        """What the descriptions state this name is (:func:`description_claims`, and in Chinese
        :func:`.chinese.stated_names`)."""
        return {c for text in self.descriptions.values()
                for c in description_claims(self.name, text) | stated_names(self.name, text)}

    @cached_property
    def plural(self) -> bool:
        """A group's name, as the descriptions' verbs say (:func:`.english.plural_name`)."""
        return plural_name(self.name, self.english)

    @cached_property
    def capitals(self) -> bool:
        """A one-word name its descriptions write in capitals (``KVP``, ``NASA``): an acronym,
        not a person's surname or first name (in a script with case)."""
        key = name_key(self.name)
        if len(key) != 1 or len(key[0]) < 2 or not key[0].isupper():
            return False
        written = accented_key(self.name, key[0])
        return any(_stands_alone(written, text) for text in self.descriptions.values())

    @cached_property
    def spans(self) -> frozenset[tuple[str, str]]:
        """The life spans the descriptions give the name itself (:func:`_own_spans`), as (birth
        year, end year or ""). Two births among them (:func:`birth_years`) say the one string
        names two people, described in different texts."""
        english = set(self.english)
        return frozenset(span for text in self.descriptions.values()
                         for span in _own_spans(self.name, text, text in english))

    @cached_property
    def pronoun_gender(self) -> Optional[str]:
        """"M" or "F" when the descriptions' pronouns clearly say so ("... with his wife").
        A description holding one of the name's relation texts quotes the source's sentences
        (an extractor without a model describes every name of a sentence by that sentence);
        one that writes the name only in a bracketed aside (:func:`_only_in_an_aside`) is
        about someone else, whose pronouns they are, and is not read."""
        word = name_key(self.name)[-1:]
        said = gender_from_pronouns(description_pronouns([
            text for text in self.english
            if not (word and _only_in_an_aside(word[0], text) and any(r in text for r in self.relation_texts))]))
        # Else the pronouns opening its own relations' texts, as a model writes them (a text a
        # description holds is a source sentence, about no one name: not read).
        return said or gender_from_pronouns(opening_pronouns([
            t for t in self.source_texts if not any(t in d for d in self.descriptions.values())]))


# Kept per description text: a write that touches a name reads its profile again, old
# descriptions and all, and a pair's rules search a name's descriptions for each pair it is
# in. Keyed by the text itself, so exact whoever wrote or deleted since; bounded like the
# other caches of pure functions here; strings and tuples of strings only, which the
# collector stops tracking.
_TEXTS_KEPT = 1 << 15


@lru_cache(maxsize=_TEXTS_KEPT)
def _description_words(text: str) -> tuple[str, ...]:
    """The words of a description a profile counts (stopwords left out), in order; interned,
    so the descriptions kept here and the profiles' counts share one string per word."""
    lowered = text.lower()
    words = (_ASCII_WORD if lowered.isascii() else _WORD).findall(lowered)
    return tuple(sys.intern(w) for w in words if w not in STOPWORDS)


def _stands_alone(word: str, text: str) -> bool:
    """Whether ``text`` writes ``word`` with no word character (``\\w``: alphanumeric or
    ``_``) either side. A string search: a pattern compiled per name costs more than the
    reading, and there are more names than ``re``'s cache holds."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        before, after = text[at - 1:at], text[end:end + 1]
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        at = text.find(word, at + 1)
    return False


def name_targets(name: str) -> tuple[str, ...]:
    """The claim keys under which a description could state another name is ``name``."""
    found = designation(name)
    return (f"K {' '.join(name_key(name))}", *([f"D {found[0]} {found[1][-1]}"] if found else []))


def _states(pa: "NameProfile", pb: "NameProfile") -> bool:
    """Whether one profile's descriptions state it is the other's name or designation."""
    for teller, told in ((pa, pb), (pb, pa)):
        found = designation(told.name)
        # A claim names the other's first word or owner: a text without it claims nothing of it
        # (accents are dropped from keys, not from the text: that text is read in full).
        word = (found or name_key(told.name))[0].lower()
        if word not in teller.text and teller.text.isascii():
            continue
        if found and all(f"D {found[0]} {w}" in teller.claims for w in found[1]):
            return True
        if f"K {' '.join(name_key(told.name))}" in teller.claims:
            return True
    return False


def chunk_claims(extraction: ChunkExtraction) -> set[tuple[str, str]]:
    """(name, claim key) for what each name's description in one chunk states (the first
    description of a name in the chunk, as its profile keeps it)."""
    seen: set[str] = set()
    claims: set[tuple[str, str]] = set()
    # By text (a sentence names several): its English cues, or whether it may state a name in
    # Chinese (only a text with a Han character can: most texts are read no further).
    cues: dict[str, tuple[Optional[tuple[bool, bool, bool]], bool]] = {}
    for ent in extraction.get("entities", []):
        name = normal_name(ent["name"])
        if name and ent.get("description") and name not in seen:
            seen.add(name)
            text = str(ent["description"])
            if text not in cues:
                english = claim_cues(text)
                cues[text] = english, english is None and has_han(text)
            found, han = cues[text]
            if found is not None:
                claims.update((name, claim) for claim in cued_claims(name, text, found))
            elif han:
                claims.update((name, claim) for claim in stated_names(name, text))
    return claims


def raw_names(extraction: ChunkExtraction) -> set[str]:
    """Every normalised name a chunk's extraction mentions (entities and relation ends)."""
    names = {normal_name(e["name"]) for e in extraction.get("entities", [])}
    for rel in extraction.get("relations", []):
        names.add(normal_name(rel["source"]))
        names.add(normal_name(rel["target"]))
    names.discard("")
    return names


def name_profiles(extractions: Mapping[str, ChunkExtraction], names: set[str]) -> dict[str, NameProfile]:
    """Profiles of ``names`` from ``extractions`` (which must hold every chunk mentioning
    them); a name no extraction mentions gets no profile."""
    profiles: dict[str, NameProfile] = {}

    def profile(name: str) -> NameProfile:
        found = profiles.get(name)
        if found is None:
            found = profiles[name] = NameProfile(name)
        return found

    for chunk_id, extraction in extractions.items():
        for ent in extraction.get("entities", []):
            name = normal_name(ent["name"])
            if name in names:
                p = profile(name)
                p.types[str(ent.get("type") or "UNKNOWN").upper()] += 1
                p.words.update(_description_words(str(ent.get("description", ""))))
                p.chunks.add(chunk_id)
                if ent.get("description"):
                    p.descriptions.setdefault(chunk_id, str(ent["description"]))
        for rel in extraction.get("relations", []):
            src, tgt = normal_name(rel["source"]), normal_name(rel["target"])
            for end, other in ((src, tgt), (tgt, src)):
                if end in names and other and other != end:
                    p = profile(end)
                    p.neighbours.add(other)
                    p.chunks.add(chunk_id)
                    if rel.get("description"):
                        p.relation_texts.append(str(rel["description"]))
                        if end == src:
                            p.source_texts.append(str(rel["description"]))
    for p in profiles.values():
        for own in p.name.lower().split():
            p.words.pop(own, None)  # a description naming its entity says nothing about a match
    return profiles


def _cosine(pa: NameProfile, pb: NameProfile) -> float:
    """Cosine of the two profiles' description words (word counts: the dot product is an
    integer, exact in any order, so only the shared words are visited)."""
    if not pa.words or not pb.words:
        return 0.0
    wa, wb = pa.words, pb.words
    return sum([wa[k] * wb[k] for k in wa.keys() & wb.keys()]) / (pa.norm * pb.norm)


_BASE = {"same_key": 0.8, "initials": 0.75, "middle_name": 0.75, "surname": 0.6, "first_name": 0.55,
         "acronym": 0.55, "abbreviation": 0.6, "stated": 0.8, "possessive": 0.75, "head": 0.6, "extended_name": 0.6,
         "category": 0.6, "spelling": 0.6, "overlap": 0.2, "fuzzy": 0.2, "similar": 0.2}
# Names that differ only in spelling start higher than a title apart; a type disagreement
# weighs against equal keys without vetoing them; a chunk in common counts for a pair.
_SURFACE, _KEY_TYPE_CONFLICT, _SAME_CHUNK = 0.9, -0.2, 0.1
# A spelled acronym (of at least this many letters) starts as high as initials against names.
_SPELLED_LETTERS, _SPELLED = 3, 0.15
# Relations that, alone, allow two names in one group (the others need an accepted pair).
COMPATIBLE = frozenset(_BASE) - UNSETTLED_RELATIONS - {"acronym", "abbreviation", "spelling"}
# A part of a name its fuller name's writer uses for it (:func:`_named_by_its_part`) counts as
# much as a text in common.
_NAMED_BY_ITS_PART = 0.1
# Descriptions of two writers' forms of a name (a spelling, middle names added) alike at least
# this much (word cosine) count for it.
_SPELLING_ALIKE = 0.3
# An untyped surname written in other texts than its full name is that person where the two
# are described this alike (word cosine; "Tolvar was backup pilot for the second flight" /
# "Brenna Tolvar flew the third flight"); a surname two full names of the graph carry stays
# alone (``part``), so this reads only a surname with one plausible bearer.
_SURNAME_ALIKE = 0.5
# A short form kept from a name's own letters: one of two names it could stand for stays alone.
_SHORT_FORMS = frozenset({"acronym", "abbreviation"})
_PERSON_PARTS = frozenset({"surname", "first_name"})
# Relations of a name and a shorter form of it that needs something else in common.
_PARTS = _PERSON_PARTS | {"head", "extended_name", "category"}


@dataclass(frozen=True)
class PairDecision:
    """One candidate pair, its score and why: ``merge``, ``ask`` (a model may settle it)
    or ``distinct``."""

    a: str
    b: str
    relation: str
    score: float
    verdict: str
    evidence: dict[str, Any]
    # A one-word name that is part of a fuller one (a surname, a first name): which fuller
    # names it could stand for is remembered whatever the verdict, so one that could stand
    # for several stays alone (BRANT: TOM BRANT, ANNA BRANT).
    part: bool = False
    # Not merged on its own, but merged if either name's group holds a titled name.
    if_person: bool = False
    # Of a part: a text of the shorter name names the fuller one too (``shares``), or every
    # one does (``covers``): grouping reads which fuller names its texts could mean.
    shares: bool = False
    covers: bool = False


# A life span in brackets, the years in four digits: "(1893-1943)", "（1912–2011）", "(1928-)"
# for one living, or with the days ("(November 6, 1893 – May 26, 1943)", "(6. November 1893 -
# ...)"): a day's number beside a month's word, never a word alone ("(reigned 1916-1918)" is
# an office's term). Its first year is the birth; a single bracketed year ("Harbour Lights
# (1969)", a work's) or a year in the prose ("president from 1919") is no life span.
_DAY = r"(?:\d{1,2}\.?\s+[^\W\d_]+\.?\s+|[^\W\d_]+\.?\s+\d{1,2},?\s+)?"
_LIFE_SPAN = re.compile(rf"[(（]\s*{_DAY}(\d{{4}})\s*[-‐‑–—]\s*(?:{_DAY}(\d{{4}})\s*)?[)）]")
# Other words that may stand among the name's words before the bracket: a middle name
# ("Ada Maria Holm (1901-1980)" for ADA HOLM).
_MIDDLE_WORDS = 2
# Any decimal digit: a text without one states no year (searched in C, not letter by letter).
_DIGIT = re.compile(r"\d")


def _year(digits: str | None) -> str:
    """A year of four decimal digits in ASCII ("" for none): a text may write it in any script's
    digits (full-width ones in CJK text), and spans are compared and ordered as strings."""
    return f"{int(digits):04d}" if digits else ""


@lru_cache(maxsize=_TEXTS_KEPT)
def _own_spans(name: str, text: str, english: bool) -> tuple[tuple[str, str], ...]:
    """The life spans ``text`` gives ``name`` itself, (birth, end or ""): a span in brackets (and
    in English "(born 1929, ...)", :func:`.english.born_asides`) right after the name as written, its
    last word just before the bracket, every word of it among the few words before, and no
    lower-case word longer than a particle ("von", "de") among them. So another person's dates
    in the description ("son of Henry Hale (1863-1947)") are not read as the name's."""
    if _DIGIT.search(text) is None:  # a life span and a birth aside both write a year in digits
        return ()
    key = name_key(name)
    if not key:
        return ()
    found = [(m.start(), (_year(m.group(1)), _year(m.group(2)))) for m in _LIFE_SPAN.finditer(text)]
    found += [(at, (_year(year), "")) for at, year in born_asides(text)] if english else []
    spans = []
    for at, span in found:
        words = text[:at].split()[-(len(key) + _MIDDLE_WORDS):]
        keys = [name_key(w)[-1:] for w in words]
        if not keys or keys[-1] != key[-1:] or not set(key) <= {k[0] for k in keys if k}:
            continue
        first = keys.index(key[:1])
        if any(w[:1].islower() and len(w) > 3 for w in words[first:]):
            continue
        spans.append(span)
    return tuple(spans)


def birth_years(spans: frozenset[tuple[str, str]]) -> frozenset[str]:
    """The births among ``spans`` (:attr:`NameProfile.spans`). A span ending in the year another
    one that starts earlier ends is not read as a birth: encyclopedia text writes a ruler's or
    an office holder's term in a life span's shape ("Sultan X (1620–1655)", beside "X
    (1598–1655)"), and a reign or a term held until death ends with the life. Two people of one
    name dying in one year is the rarer case, and only lets other evidence decide."""
    ends: dict[str, str] = {}
    for start, end in spans:
        if end and start < ends.get(end, "9999"):
            ends[end] = start
    return frozenset(start for start, end in spans if not end or ends[end] == start)


def _tells_of(p: NameProfile, owner: str) -> bool:
    """Whether a profile's neighbours or descriptions name ``owner`` (a proper word)."""
    if any(name_key(n)[-1:] in ((owner,), (owner + "'S",)) for n in p.neighbours):
        return True
    word = re.compile(rf"(?<![\w-]){re.escape(owner.capitalize())}(?![\w-])")
    return any(word.search(text) for text in p.descriptions.values())


def _incorporated(name: str) -> bool:
    """A company's legal name: a corporate suffix ends it (``THE HALDEN PICTURE COMPANY, INC.``)."""
    tokens = TOKEN.findall(normal_name(name))
    return len(tokens) > 1 and tokens[-1] in CORPORATE


def _told_apart(pa: NameProfile, pb: NameProfile) -> bool:
    """A company and what bears its name without the suffix, which their descriptions tell
    apart: "Cartoon Network is a channel owned by The Cartoon Network, Inc.", "The Cartoon
    Network, Inc. is the company that owns Cartoon Network"."""
    if _incorporated(pa.name) == _incorporated(pb.name):
        return False
    company, other = (pa, pb) if _incorporated(pa.name) else (pb, pa)
    words = [re.escape(t.lower()) for t in TOKEN.findall(normal_name(company.name))]
    if re.search(r"(?<!\w)" + r"\W+".join(words) + r"(?!\w)", other.text):
        return True
    # Named as another thing, the object of a word in lower case ("owns Cartoon Network"), not
    # followed by the suffix (its own name) or by another word of a name.
    bare = r"\W+".join(re.escape(t) for t in name_key(other.name))
    suffixes = "|".join(sorted(CORPORATE))
    pattern = re.compile(rf"(?<![\w,])[a-z]+\s+(?:the\s+)?(?i:{bare})(?!\w)(?!(?i:\W{{0,2}}(?:{suffixes}))\b)"
                         r"(?!\s+[A-Z])")
    return any(pattern.search(text) for text in company.descriptions.values())


def _related(pa: NameProfile, pb: NameProfile) -> bool:
    """Whether an extraction states a relation between the two names: a relation recorded,
    and no text in common whose description of one holds the other's (one sentence read for
    both, as an extractor without a model describes its names: there a relation says only
    that the sentence names both)."""
    if pb.name not in pa.neighbours and pa.name not in pb.neighbours:
        return False
    for chunk in pa.descriptions.keys() & pb.descriptions.keys():
        da, db = pa.descriptions[chunk], pb.descriptions[chunk]
        if da in db or db in da:
            return False
    return True


@lru_cache(maxsize=_TEXTS_KEPT)  # a description is searched for each pair its name is in
def _searched(text: str) -> str:
    """``text`` as :func:`_places` searches it: folded, or in capitals where a letter folds
    into two (positions must stay the text's)."""
    folded = fold_name(text)
    return folded if len(folded) == len(text) else text.upper()


def _places(word: str, text: str) -> Iterator[int]:
    """Where ``text`` writes the key word ``word`` (upper case, accents folded) as a word of its
    own, in any case and accents."""
    folded = _searched(text)
    at = folded.find(word)
    while at >= 0:
        end = at + len(word)
        if not folded[at - 1:at].isalnum() and not folded[end:end + 1].isalnum():
            yield at
        at = folded.find(word, at + 1)


_BEFORE_WORD = re.compile(r"(?:^|([.!?:;]\s+)|\s)([^\W\d_]+)(\.?)\s+$", re.UNICODE)
# The word written right after a name in the same sentence (spaces between, no punctuation).
_AFTER_WORD = re.compile(r"[ \t]+([^\W\d_]+)", re.UNICODE)


def _another_bearer(pa: NameProfile, pb: NameProfile, first: bool = False) -> bool:
    """Whether the one-word name's descriptions write it after a word of a name that the
    fuller name has not (an initial, or a capitalised word not opening the sentence; a title
    is none: MR. VOLLAN): there it is another bearer's surname (K. L. VOLLAN, ANNA VOLLAN beside
    ERIK VOLLAN). ``first``: the one-word name is a first name, so the word read is the one
    after it (ERIK SOLBERG beside ERIK VOLLAN; an initial of one of the fuller name's words is
    none). Scripts without case have no such words and never tell."""
    short, long = (pa, pb) if len(name_key(pa.name)) < len(name_key(pb.name)) else (pb, pa)
    word, own = name_key(short.name)[-1], set(name_key(long.name))
    # Its relations' texts are read where it has no description (a name written only in
    # relations): the offline extractor's relation texts are whole sentences, whose capitalised
    # words before a surname are as often another name of the same person (OLD HALE).
    for text in short.descriptions.values() or short.relation_texts:
        for at in _places(word, text):
            if first:
                after = _AFTER_WORD.match(text, at + len(word))
                following = fold_name(after.group(1)) if after and after.group(1)[0].isupper() else None
                if following and following not in own \
                        and not (len(following) == 1 and any(w.startswith(following) for w in own)):
                    return True
                continue
            before = _BEFORE_WORD.search(text[:at])
            if before and before.group(2)[0].isupper() and fold_name(before.group(2)) not in own \
                    and fold_name(before.group(2)) not in HONORIFICS \
                    and (len(before.group(2)) == 1 and before.group(3) or before.group(1) is None
                         and before.start(2) > 0):
                return True
    return False


def _written_as_a_name(p: NameProfile) -> bool:
    """Whether the descriptions write each word of the name as a person's name is written in a
    script with case: capitalised, neither in capitals (an acronym: "the Nordic OV Bible") nor
    in lower case (a common noun). A word in a script without case passes."""
    texts = list(p.descriptions.values())
    for word in name_key(p.name):
        if word[0].upper() == word[0].lower():
            continue
        seen = False
        for text in texts:
            for at in _places(word, text):
                written = text[at:at + len(word)]
                if not written[0].isupper() or len(written) > 1 and written[1:].isupper():
                    return False
                seen = True
        if not seen:
            return False
    return True


_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)[\"'“‘(]?$")


def _subject_texts(p: NameProfile) -> list[str]:
    """The texts whose word order tells whether the name is used as a subject: its relations'
    texts where it has any, else its descriptions. A model opens every description with the
    name it describes ("Harbury is where the painter was born"), a place or a thing as much as
    a person, so there the opening says nothing; a relation's text is written about two names,
    and the one opening it is the subject ("Marten sold the works"), the other an object ("the
    painter was born in Harbury"). The offline extractor's texts are the source's sentences,
    which open with a subject in either kind."""
    return p.relation_texts or list(p.descriptions.values())


def _refers_back(pa: NameProfile, pb: NameProfile) -> bool:
    """Whether the shorter name is only ever used in texts that name the fuller one too, and
    the texts telling its role (:func:`_subject_texts`: a model often writes a surname only in
    relations, "Marten sold the works") open a sentence with it alone: a surname written after
    the full name to refer back to it, as the subject ("Ilse Marten ... Marten sold the
    works"), not a name that stands on its own elsewhere, nor a place or a thing the text only
    mentions ("a club playing in Marten"; the city that ends an institution's name: "studied at
    Selby College Harbury ... her parents lived in Harbury"). Read from the chunks and the word
    order alone, in any language that writes its subject first."""
    short, long = (pa, pb) if len(name_key(pa.name)) < len(name_key(pb.name)) else (pb, pa)
    if not short.chunks or not short.chunks <= long.chunks or not _written_as_a_name(long):
        return False
    return _opens_a_sentence(name_key(short.name)[-1], _subject_texts(short))


def _named_by_its_part(pa: NameProfile, pb: NameProfile) -> bool:
    """Whether the fuller name's relations' texts, each written about that name, open a
    sentence with the shorter name alone ("Marten sold the works" as a text of ILSE MARTEN): its
    writer calls it by that part. Only where the shorter name is used in no text without the
    fuller one, and the fuller one is written as a name (:func:`_written_as_a_name`). A relation
    text a description holds is a source sentence quoted for every name in it (the offline
    extractor's), written about none of them: not read. Word order and case only."""
    short, long = (pa, pb) if len(name_key(pa.name)) < len(name_key(pb.name)) else (pb, pa)
    if not short.chunks or not short.chunks <= long.chunks or not long.relation_texts:
        return False
    written = [t for t in long.relation_texts if not any(t in d for d in long.descriptions.values())]
    return _opens_a_sentence(name_key(short.name)[-1], written) and _written_as_a_name(long)


# One-word names listed at the end of a text, each but the last with a comma, the last with a
# comma or one joining word after it: "Holm, Marten, and ", "Holm, ", "Holm und ".
_NAME_WORD = r"[^\W\d_][\w'’-]*"
_LISTED_BEFORE = re.compile(rf"(?:{_NAME_WORD},\s+)*(?:{_NAME_WORD},?\s+[^\W\d_]+\s+|{_NAME_WORD},\s+)$")


def _list_opening(prefix: str) -> str:
    """``prefix`` without the one-word names listed at its end: a subject can be a list of
    surnames ("Holm, Marten and Vik all left"), each as much the subject as the first. Only
    where every listed word is capitalised (names, not words of the sentence) and the joining
    word, if any, is not (any language's lower-case conjunction: "and", "und", "et")."""
    listed = _LISTED_BEFORE.search(prefix)
    if not listed:
        return prefix
    words = re.findall(rf"{_NAME_WORD},?", listed.group(0))
    joining = [] if words[-1].endswith(",") else [words.pop()]
    if not all(w[0].isupper() for w in words) or not all(w.islower() for w in joining):
        return prefix
    return prefix[:listed.start()]


def _opens_a_sentence(word: str, texts: list[str]) -> bool:
    """Whether one of ``texts`` opens a sentence with the key word ``word`` alone (not as the
    first word of a longer name: "Marten Harbour is ..."), or with a list of one-word names
    holding it (:func:`_list_opening`)."""
    for text in texts:
        for at in _places(word, text):
            after = text[at + len(word):at + len(word) + 2]
            if _SENTENCE_START.search(_list_opening(text[:at])) \
                    and not (after[:1] == " " and after[1:].isupper() and after[1:].isalpha()):
                return True
    return False


def _only_an_object(pa: NameProfile, pb: NameProfile) -> bool:
    """Whether the shorter name's relations' texts, written about each relation, all write it
    as an object, none opening a sentence with it: a place or a thing the relations mention
    ("her parents lived in Harbury"), not a surname standing for the fuller name, which is the
    subject of what is told of that person. Descriptions alike in the words of a third name
    both mention ("Harbury is where Wilma's parents lived", "Selby College Harbury is where
    Wilma studied") say no more than that they share the neighbour. A relation's text that a
    description holds is a source sentence quoted for every name in it (the offline
    extractor's), written about none of its relations: a surname sits inside such a sentence
    ("a sonata by Schubert") as often as a place, so it is not read here."""
    short = pa if len(name_key(pa.name)) < len(name_key(pb.name)) else pb
    written = [t for t in short.relation_texts if not any(t in d for d in short.descriptions.values())]
    return bool(written) and not _opens_a_sentence(name_key(short.name)[-1], written)


def _only_in_an_aside(word: str, text: str) -> bool:
    """Whether ``text`` writes the key word ``word`` and only inside brackets (more opened than
    closed before it: a quoted sentence may be cut before its aside closes). A bracketed aside
    lists what the sentence's subject is called, or written in, or when it lived, side by side:
    the sentence is about its subject, not about a name of the aside."""
    if "(" not in text and "（" not in text:
        return False  # most texts have no aside: nothing to search
    places = list(_places(word, text))
    return bool(places) and all(
        text.count("(", 0, at) + text.count("（", 0, at) > text.count(")", 0, at) + text.count("）", 0, at)
        for at in places)


def _in_an_aside(pa: NameProfile, pb: NameProfile) -> bool:
    """Whether every text both names are in describes the shorter one by sentences it quotes
    for the fuller one too (its description there held in the fuller name's: an extractor
    without a model describes a name by the sentences it occurs in) and writes it only in a
    bracketed aside (:func:`_only_in_an_aside`). A last word written again in an aside that
    names the subject's other names or languages side by side names another thing (a name and
    its qualified form: "(in Vessic Harbish: ..., in Harbish: ...)"); a surname that refers
    back to the full name is written in the running text. Their descriptions, alike by
    construction, say nothing of the pair."""
    short, long = (pa, pb) if len(name_key(pa.name)) < len(name_key(pb.name)) else (pb, pa)
    chunks = short.chunks & long.chunks
    word = name_key(short.name)[-1]
    for chunk in chunks:
        text = short.descriptions.get(chunk)
        if text is None or text not in long.descriptions.get(chunk, "") or not _only_in_an_aside(word, text):
            return False
    return bool(chunks)


def _its_own_kind(pa: NameProfile, pb: NameProfile, corroborated: bool) -> bool:
    """Whether, with no types, the bare name of a ``category`` pair ("KELM SPRINGS" / "KELM
    SPRINGS RESORT") is said to be the kind of thing the fuller name's last word says: its
    English descriptions say it is one ("... is the resort near Harbury"), or, with something
    else in common (``corroborated``), both say the same noun of what they are ("the animation
    studio that ..."). Not where the two are related, nor where the bare name's descriptions
    write the fuller name: then the bare name is another thing called after it (a film "X",
    "produced by X Pictures")."""
    bare, full = (pa, pb) if len(name_key(pa.name)) < len(name_key(pb.name)) else (pb, pa)
    word = name_key(full.name)[-1]
    # The fuller name written in the bare one's descriptions: its last word capitalised there.
    if _related(pa, pb) or any(text[at].isupper() for text in bare.descriptions.values() for at in _places(word, text)):
        return False
    if said_to_be(bare.name, bare.english, word):
        return True
    return corroborated and bool(bare.roles & full.roles)


def _article_led(name: str) -> bool:
    words = normal_name(name).split()
    return bool(words) and words[0] in ARTICLES


def _qualified(a: str, b: str) -> bool:
    """Whether one name adds a qualifier to the other, beyond articles and counts: of a group,
    "THE YOUNG BRANTS" are some of "THE BRANTS"; "THREE WARDENS" are "THE WARDENS"."""
    return set(key_of(a, False)) - _NUMBER_WORDS != set(key_of(b, False)) - _NUMBER_WORDS


def _two_writers(pa: NameProfile, pb: NameProfile, shared: list[str], description: float,
                 spelt: bool = False) -> bool:
    """Whether two forms of one name read as two writers' names of one thing: a name in common
    (a neighbour; of one name spelt two ways, ``spelt``, also :func:`_neighbour_described`),
    descriptions alike, and no text writing both (one text writing two forms names two things,
    unless it states one is the other: the ``stated`` relation). Middle names added are a
    weaker likeness of names than a spelling, so there a neighbour in common is asked for."""
    return description >= _SPELLING_ALIKE and not pa.chunks & pb.chunks \
        and (bool(shared) or spelt and _neighbour_described(pa, pb))


def _neighbour_described(pa: NameProfile, pb: NameProfile) -> bool:
    """Whether a neighbour of one name is named in the other's descriptions: a model's
    description states relations it did not also write as records ("X was Nils Vang's
    grandfather", with no relation to NILS VANG), so a name in common may stand in a
    description only. A name of two words or more only: one word (a country, a first name) is
    too common a link between two things."""
    for p, q in ((pa, pb), (pb, pa)):
        texts = [text.upper() for text in q.descriptions.values()]
        for neighbour in p.neighbours - {pa.name, pb.name}:
            if len(name_key(neighbour)) > 1 and any(neighbour in text for text in texts) \
                    and any(re.search(rf"(?<![\w-]){re.escape(neighbour)}(?![\w-])", text) for text in texts):
                return True
    return False


def _evidence(pa: NameProfile, pb: NameProfile, relation: str, shared: list[str], description: float,
              same_chunk: bool) -> dict[str, Any]:
    """What a pair's decision read, for a person to review (in the pair's name order)."""
    types = [pa.type, pb.type] if pa.name <= pb.name else [pb.type, pa.type]
    return {"relation": relation, "types": types, "shared_neighbours": shared[:5],
            "shared_neighbour_count": len(shared), "description_similarity": round(description, 3),
            "same_chunk": same_chunk}


def _type_weight(pa: NameProfile, pb: NameProfile) -> float:
    """What the types add to a relation only a model settles: a little where both are known
    and agree, much against where they disagree."""
    if pa.type == "UNKNOWN" or pb.type == "UNKNOWN":
        return 0.0
    return 0.05 if pa.type == pb.type else -0.5


def _reach(relation: str, shared: int, description: float, type_weight: float) -> float:
    """The highest score a pair of a relation only a model settles (``UNSETTLED_RELATIONS``)
    can have: nothing else :func:`decide_pair` reads adds to it (``type_weight``: the pair's
    :func:`_type_weight`). For an ``UNWORKED`` pair, the highest of those relations' scores."""
    base = _UNWORKED_BASE if relation == UNWORKED else _BASE[relation]
    return round(base + 0.1 * min(shared, 3) + 0.5 * description + type_weight, 4)


# An ``UNWORKED`` pair's relation is one of the unsettled ones (or none): it starts no higher than this.
_UNWORKED_BASE = max(_BASE[r] for r in UNSETTLED_RELATIONS)


def cannot_be_asked(pa: NameProfile, pb: NameProfile, relation: str, ask_threshold: float) -> bool:
    """Whether :func:`decide_pair` stops the pair at its first check: a relation only a model
    settles, whose score cannot reach ``ask_threshold``. Such a decision is ``distinct``, no
    ``part`` and no person's pair, so a pass keeping only the decisions it uses need not
    build it (most pairs of loose blocking). Reads only the neighbours, types and words.
    True of an ``UNWORKED`` pair where none of the unsettled relations could be asked: then
    its relation need not be worked out."""
    if relation not in UNSETTLED_RELATIONS and relation != UNWORKED:
        return False
    common = pa.neighbours & pb.neighbours
    shared = len(common) - (pa.name in common) - (pb.name in common)
    weight = _type_weight(pa, pb)
    if _reach(relation, shared, 1.0, weight) < ask_threshold:  # not even with alike descriptions
        return True
    return _reach(relation, shared, _cosine(pa, pb), weight) < ask_threshold


def decide_pair(pa: NameProfile, pb: NameProfile, relation: str, *, threshold: float,
                ask_threshold: float) -> PairDecision:
    """Score a candidate pair from the name relation and the evidence of both profiles.

    Types that disagree (both known) count heavily against; shared neighbours, similar
    descriptions and agreeing person cues count for. Genders that disagree (a title, or the
    descriptions' pronouns) keep the names apart; a description rather than a name ("THE
    GIRL"), or a group's name with a qualifier ("THE YOUNG BRANTS"), merges only with a
    model's word. ``threshold`` is where a merge starts;
    pairs between ``ask_threshold`` and it, from a weaker name relation, are ambiguous.
    """
    a, b = sorted((pa.name, pb.name))
    ta, tb = pa.type, pb.type
    told = look_alike(a, b)
    if told in NEVER_ALIKE:  # whatever else the pair shares, the names say two things (ORION 4 / 6)
        return PairDecision(a, b, relation, 0.0, "distinct", {"relation": relation, "look_alike": told})
    births = birth_years(pa.spans | pb.spans)
    if len(births) > 1:
        # Two birth years: the names' descriptions give two people, or one name's own texts do
        # (a string two people bear, which then merges with nothing: whichever of them the
        # other name is, a merge would join it to both).
        return PairDecision(a, b, relation, 0.0, "distinct", {"relation": relation, "births": sorted(births)})
    # A description stating the other name ("Frank is Hale's nephew") is the relation itself.
    if relation == "stated" and not _states(pa, pb):
        return PairDecision(a, b, relation, 0.0, "distinct", {"relation": relation, "stated": False})
    shared = sorted((pa.neighbours & pb.neighbours) - {pa.name, pb.name})
    description = _cosine(pa, pb)
    # One text using both names: a short form after the full one is the same thing; two
    # full names sharing a word ("TOM BRANT", "NED BRANT") are two things named apart.
    same_chunk = bool(pa.chunks & pb.chunks) and relation not in UNSETTLED_RELATIONS
    typed = pa.type != "UNKNOWN" and pb.type != "UNKNOWN"
    if relation in UNSETTLED_RELATIONS:
        # Only a model merges these, and only from ``ask_threshold`` on: a score that cannot
        # reach it is settled here, before the costlier signals (pronouns, plurals) are read.
        reach = _reach(relation, len(shared), description, _type_weight(pa, pb))
        if reach < ask_threshold:
            return PairDecision(a, b, relation, reach, "distinct", _evidence(pa, pb, relation, shared,
                                                                            description, same_chunk))
    # An acronym of three letters or more that spells the other name's initials, accents
    # and all (TLS, ÉTS), names it without more evidence: two letters (CT, EU) are too many
    # things' initials. An acronym of two expansions stays alone (``part``).
    spelled = relation == "acronym" and min(len(name_key(a)[0]), len(name_key(b)[0])) >= _SPELLED_LETTERS \
        and 1 in (len(name_key(a)), len(name_key(b)))
    corroborated = relation == "stated" or bool(shared) or description >= 0.2 or spelled
    if not corroborated and (relation in _PARTS or relation in _SHORT_FORMS or relation == "same_key" and typed and ta != tb):
        corroborated = _states(pa, pb)  # only where something in common is asked for: it reads every description
    if relation == "spelling":
        # One name spelt two ways (a transliteration, a word split or joined) comes from two
        # writers: one text writing both spellings names two things, or states one is the
        # other's (``stated``). So: no text in common, a name in common (a neighbour, or one
        # name's neighbour in the other's descriptions), descriptions alike and types that agree
        # where both are given; the names alone never decide
        # (JOHANN MÜLLER / JOHANN MILLER).
        corroborated = _two_writers(pa, pb, shared, description, spelt=True) and not (typed and ta != tb)
    genders = {gender(pa.name) or pa.pronoun_gender, gender(pb.name) or pb.pronoun_gender} - {None}
    surface = relation == "same_key" and surface_variants(a, b)
    score = (_SURFACE if surface else _BASE[relation]) + 0.1 * min(len(shared), 3) + 0.5 * description \
        + _SAME_CHUNK * same_chunk + _SPELLED * spelled
    if typed:
        # Equal keys are strong evidence: a type disagreement there may be the extractor's.
        score += 0.05 if ta == tb else (_KEY_TYPE_CONFLICT if relation == "same_key" else -0.5)
    if relation == "same_key" and typed and ta != tb:
        # Equal keys and types that disagree (the company "APPLE", the fruit "THE APPLE";
        # "MR. INDIA", a film, and "INDIA"): one thing only with a text, a neighbour or a
        # description in common.
        corroborated = corroborated or same_chunk
        relation_ok = corroborated
    else:
        relation_ok = True
    person = "PERSON" in (ta, tb) or bool(genders)
    if relation in _PERSON_PARTS and (pa.capitals or pb.capitals):
        # An acronym is no part of a person's name (KVP / THE KVP is not a surname): nor does
        # it count among the fuller names such a part could stand for.
        return PairDecision(a, b, relation, 0.0, "distinct", {"relation": relation, "acronym": True})
    if relation in _PERSON_PARTS:
        # Part of a person's name; of anything else ("MIDSUMMER" / "HAPPY MIDSUMMER") it is not.
        if person:
            score += 0.1
        elif {ta, tb} - {"UNKNOWN"}:
            score -= 0.5
        # With nothing saying it is a person, a part of a name stands for the whole only
        # where a text used both (a surname after the full name), never a first name alone;
        # and the descriptions must agree ("Film Victoria" is described apart from
        # "Victoria"; "Halvorsen" in the sentences about "Ingrid Halvorsen").
        # Untyped names that would merge as parts of a person's name: they do when their
        # group turns out to be a person (a titled name in it: "MR. EDWIN HALE").
        if_person = (not person and ta == tb == "UNKNOWN" and corroborated
                     and round(score + 0.1, 4) >= threshold)
        # Both said to be people (typed so, a title or the pronouns), and one text naming
        # both with a full name (no initial in it): there a surname or a first name refers
        # back to it (GÜNTHER WALLRAFF ... WALLRAFF); the ambiguity of a part (``part``)
        # keeps one that two full names share alone.
        people = all(p.type == "PERSON" or gender(p.name) or p.pronoun_gender for p in (pa, pb))
        full = all(len(t) > 1 for t in max(name_key(a), name_key(b), key=len))
        # Names with no type, people or not by their pronouns: pronouns tell a person, not
        # which of a family. A surname that refers back (``_refers_back``) may follow a full
        # name written with initials (K. L. MARTEN ... MARTEN) as well as one with a first name:
        # the surname's text names no other bearer (``_another_bearer``: other initials or
        # another first name before it), the two are not related, and a surname two full
        # names of the graph carry stays alone (``part``), as after a first name. A first name
        # refers back so only to a person (the pronouns of its own texts or the fuller name's:
        # "Mira Castell ... Mira once taught", with "She runs the workshop" as her relation's
        # text), never a place or a thing that opens a name (JORDAN / JORDAN HALE), and where its
        # text writes no other surname after it.
        untyped = ta == tb == "UNKNOWN"
        if untyped and (_related(pa, pb) or relation == "surname" and _another_bearer(pa, pb)):
            # An extraction relating the two names holds them two things: a relative named
            # with the famous bearer of the surname (ERIK VOLLAN, son of VOLLAN), a thing named
            # after another (the airline of a country). A name that refers back is no relation
            # of itself. Nor is a surname its own text writes after another first name or
            # initials (K. L. VOLLAN, where the fuller name is ERIK VOLLAN).
            return PairDecision(a, b, relation, round(score, 4), "distinct",
                                {**_evidence(pa, pb, relation, shared, description, same_chunk), "related": True},
                                part=True, **_texts_of_a_part(pa, pb, relation))
        corroborated = corroborated and (person or relation == "surname" and bool(pa.chunks & pb.chunks)
                                         and description >= 0.3 and not _only_an_object(pa, pb)
                                         and not _in_an_aside(pa, pb)
                                         or untyped and relation == "surname" and not pa.chunks & pb.chunks
                                         and description >= _SURNAME_ALIKE and not _only_an_object(pa, pb)) \
            or people and full and bool(pa.chunks & pb.chunks) \
            or untyped and _refers_back(pa, pb) and (relation == "surname" or person and not _another_bearer(pa, pb, first=True))
        # The fuller name's own relations written with the part alone as their subject ("Marten
        # sold the works" as a text of ILSE MARTEN): the writer calls that one by the part, so
        # the part, used only in the fuller name's texts, is it. A first name as a surname; not
        # where a type says it is no person's, nor related, nor written by another bearer's name.
        if not corroborated and {ta, tb} <= {"UNKNOWN", "PERSON"} and _named_by_its_part(pa, pb) \
                and not _related(pa, pb) and not _another_bearer(pa, pb, first=relation == "first_name"):
            corroborated = True
            score += _NAMED_BY_ITS_PART
        # Said to be different things ("a jester", "a dealer"): JACK MILLER is no OLD JACK.
        # (The roles are read only where they could undo something.)
        if (corroborated or if_person) and pa.roles and pb.roles and not pa.roles & pb.roles:
            corroborated = if_person = False
    else:
        if_person = False
    if relation == "same_key" and not surface \
            and not (person and (corroborated or same_chunk or len(name_key(a)) > 1)):
        # A title or a descriptive word dropped (JUDGE BROWN / BROWN, OLD HARBOUR / HARBOUR):
        # a person's name, and something else in common unless a full name is left (MR. ADA
        # PENNICK / ADA PENNICK), or no merge.
        corroborated = relation_ok = False
    if relation == "same_key" and relational(name_key(a)) and _article_led(a) != _article_led(b) \
            and not (shared or description >= 0.2):
        # A leading article on a title (THE HOUND OF THE HILLS, a film; HOUND OF THE HILLS, the
        # dog in it): one thing only with a neighbour or the words of the descriptions in common.
        relation_ok = False
    if relation == "same_key" and _article_led(a) != _article_led(b) and pa.descriptions.keys() & pb.descriptions.keys():
        # One text describing both the name and the name with a leading article (the city
        # HARBOURTON and the newspaper THE HARBOURTON): its extractor told two things apart.
        relation_ok = False
    if relation == "abbreviation":
        # Characters kept from a name (北大) name it where a text uses both, or a neighbour is shared.
        corroborated = bool(shared) or same_chunk
    if relation == "extended_name" and not person:
        # "NORDIC PRIZE" is no part of "NORDIC SHORT FILM PRIZE". With no types and
        # nothing saying either is a person, the fuller name is the shorter one with its middle
        # names only as two writers give one name (:func:`_two_writers`), and where no extraction
        # relates them (JOHN HALE and his son JOHN PAUL HALE are related, or named in one text).
        corroborated = ta == tb == "UNKNOWN" and _two_writers(pa, pb, shared, description) \
            and not _related(pa, pb)
    if relation == "category" and not (typed and ta == tb):
        # A film "X" and its studio "X PICTURES" are typed apart. Untyped, the bare name must be
        # said to be that kind of thing (:func:`_its_own_kind`).
        kind = ta == tb == "UNKNOWN" and _its_own_kind(pa, pb, corroborated)
        corroborated = kind
        score += _SAME_CHUNK * kind  # counts like a text in common
    if relation == "head":
        # "THE STEWARD" is "HALE'S STEWARD" where it is told of with Hale.
        owner = (owned(a) or owned(b))[0]  # type: ignore[index]
        bare = pa if owned(pb.name) else pb
        # A one-word head names the designation only as a common noun ("the steward"), not as a
        # word of its own ("DEATH" / "DEATH OF COLONEL BLIMP").
        common = len(name_key(bare.name)) > 1 or bare.described or normal_name(bare.name).split()[0] in ARTICLES
        corroborated = common and _tells_of(bare, owner)
        score += 0.1 * corroborated
    score = round(score, 4)
    # A part of a name, an acronym or a shared word is one thing only with something else
    # in common; similar spelling or shared words alone never merge without a model.
    apart = relation == "same_key" and _told_apart(pa, pb)
    if len(genders) > 1 or apart:  # "FENWICK" described with "his wife" is no "MRS. FENWICK"
        verdict, if_person = "distinct", False
    elif score >= threshold and relation not in UNSETTLED_RELATIONS and relation_ok \
            and (corroborated or relation in COMPATIBLE - _PARTS) \
            and (relation in ("stated", "head", "possessive", "acronym") or not (pa.described or pb.described)) \
            and not ((pa.plural or pb.plural) and _qualified(a, b)) and not told:
        verdict = "merge"
    elif score >= ask_threshold and relation not in ("initials", "middle_name"):
        verdict = "ask"
    else:
        verdict = "distinct"
    evidence = _evidence(pa, pb, relation, shared, description, same_chunk)
    if len(genders) > 1:
        evidence["genders"] = "conflict"
    if apart:
        evidence["told_apart"] = True
    for flag in ("described", "plural"):
        if getattr(pa, flag) or getattr(pb, flag):
            evidence[flag] = sorted(p.name for p in (pa, pb) if getattr(p, flag))
    # A part of a name counts towards its ambiguity only if it could be that person.
    # So is a designation: one said of two people ("TOM'S SON": PAUL, NED) stays alone; and
    # a head that could be two designations' ("THE STEWARD": HALE'S, FENWICK'S).
    part = (relation in _PARTS or relation in _SHORT_FORMS or relation == "stated" and bool(designation(a) or designation(b))) \
        and len(genders) < 2
    return PairDecision(a, b, relation, score, verdict, evidence, part=part,
                        if_person=if_person and verdict != "merge",
                        **(_texts_of_a_part(pa, pb, relation) if part else {}))


# Parts whose texts all naming one fuller name make them that one (``PairDecision.covers``):
# the end of a name (a surname, a name before middle names are added) and a form spelled from
# its letters. A name's first word alone is not among them: it opens too many other names
# (a common word opening a name, as "OPEN" in a text naming "OPEN ARCHIVES", or a first name
# written with another bearer's initials).
_COVERED_BY_ITS_TEXTS = _SHORT_FORMS | {"surname", "extended_name"}


def _texts_of_a_part(pa: NameProfile, pb: NameProfile, relation: str) -> dict[str, bool]:
    """``PairDecision.shares`` and ``covers`` of a part: facts of the texts, whatever the
    verdict, so a fuller name a text of the part names counts toward its ambiguity even where
    the two were kept apart (an extraction relating them)."""
    short, long = (pa, pb) if len(name_key(pa.name)) < len(name_key(pb.name)) else (pb, pa)
    shares = bool(short.chunks & long.chunks)
    return {"shares": shares,
            "covers": shares and short.chunks <= long.chunks and relation in _COVERED_BY_ITS_TEXTS}
