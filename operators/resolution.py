"""Entity resolution: one thing, one node, whatever names the extractions gave it.

Extractors name one thing several ways (``JACOB MARLEY``, ``MARLEY``, ``MR. MARLEY``). This
stage finds such names and maps each alias to one canonical name; the merge then groups
contributions through that map (``merge.group_contributions``), so the graph stays a pure
function of the recorded extractions plus the user's manual decisions:

- **candidates** come from blocking, never from all pairs: a normalised key (case,
  punctuation, leading articles, honorifics and descriptive words, possessives, corporate
  suffixes), key tokens shared or contained, a designation's forms and head
  (:func:`owned`), character 3-gram MinHash/LSH buckets, what a description states a name
  is (:func:`description_claims`, kept per chunk so either name finds the other), and
  optionally the cosine of name-plus-description vectors (:func:`similar_pairs`);
- **a pair's decision** is a function of the two names' profiles only (types, neighbours,
  description words, all read from the extractions), plus an optional cached model verdict
  for ambiguous pairs; so after a change only pairs touching a changed name are decided
  again, and the accepted pairs are those a fresh index would accept;
- **groups** are formed from all accepted pairs at once, in a fixed order, conservatively:
  a short name whose partners disagree (``CRATCHIT`` with ``BOB`` and ``MRS. CRATCHIT``) is
  left alone, as is a designation said of two people (``BOB'S SON``), and names of
  conflicting gender or a never-merge rule never share a group; an
  untyped part of a name (``EBENEZER``) joins its fuller name when that group holds a title.

Nothing here touches a store: the caller hands in profiles and gets back pairs and maps.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import chain, combinations
from typing import Any, Iterable, Mapping, Optional, Union

from graphrag.operators.extraction import normalize_entity_name as _normalize
from graphrag.schema import ChunkExtraction

__all__ = [
    "AliasMap",
    "ManualDecisions",
    "NameIndex",
    "NameProfile",
    "PairDecision",
    "RULES",
    "UNSETTLED_RELATIONS",
    "ResolutionState",
    "decide_pair",
    "gender",
    "group_names",
    "name_key",
    "name_profiles",
    "name_relation",
    "parse_verdicts",
    "raw_names",
    "regroup",
    "similar_pairs",
]

AliasMap = dict[str, str]

# Profiles read the same names chunk after chunk: each is normalised once.
_normal = lru_cache(maxsize=1 << 17)(_normalize)

_ARTICLES = frozenset("THE A AN".split())
_HONORIFICS = {
    **dict.fromkeys("MR MISTER SIR LORD MASTER KING PRINCE DUKE UNCLE".split(), "M"),
    **dict.fromkeys("MRS MS MISS LADY MADAM MADAME DAME QUEEN PRINCESS DUCHESS AUNT".split(), "F"),
    **dict.fromkeys("""DR PROF PROFESSOR REV REVEREND CAPT CAPTAIN PRESIDENT SENATOR GOVERNOR MAYOR
        JUDGE BISHOP POPE CARDINAL CHANCELLOR ADMIRAL COLONEL SERGEANT LIEUTENANT""".split(), None),
}
# Words that describe rather than name ("Old Fezziwig" is Fezziwig), and words a
# capitalised span can start with before the name ("Up Scrooge", "Whereat Scrooge").
_DESCRIPTIVE = frozenset(
    """OLD YOUNG LATE ELDER POOR DEAR UP BUT WHEREAT THEN NOW OH AH SO YET MY YOUR PERHAPS HOWEVER
    MEANWHILE INDEED ALTHOUGH THOUGH WHILE WHEN THUS HENCE MOREOVER FURTHERMORE NEVERTHELESS OTHERWISE
    CERTAINLY SURELY AFTERWARDS ALAS WHEREUPON""".split())
_CORPORATE = frozenset("INC CORP CORPORATION LTD LLC CO PLC GMBH LIMITED".split())
# Words that join two names into a third thing ("Scrooge and Marley", "Ghost of Christmas").
_CONNECTORS = frozenset("AND & OF FOR AT IN ON TO WITH BY FROM DE DU DA DEL VON VAN".split())
# Heads that make a name a different kind of thing than its other words ("United States
# Army" is no "United States"; "Christmas Day" no "Christmas").
_GENERIC_HEADS = frozenset(
    """ARMY NAVY COMPANY BANK UNIVERSITY COLLEGE SCHOOL ACADEMY CHURCH SOCIETY CLUB ASSOCIATION
    INSTITUTE COMMITTEE COUNCIL PARTY MINISTRY DEPARTMENT AGENCY FOUNDATION GROUP PRESS UNION
    COURT PARLIAMENT CONGRESS SENATE TEAM BAND FAMILY STREET ROAD LANE AVENUE SQUARE CITY TOWN
    VILLAGE RIVER LAKE MOUNTAIN MOUNT ISLAND ISLANDS COUNTY HALL HOUSE PARK BRIDGE CASTLE VALLEY
    SEA OCEAN BAY KINGDOM EMPIRE REPUBLIC PROVINCE STATE STATES FOREST HILL STATION AIRPORT
    WAR BATTLE FESTIVAL DAY EVE TIME YEAR REVOLUTION CONFERENCE OLYMPICS ELECTION FEAST AWARD
    AWARDS PRIZE CUP SERIES SEASON LEAGUE CHAMPIONSHIP ALBUM SONG FILM MOVIE SHOW BOOK NOVEL
    GAME GAMES MUSEUM LIBRARY HOSPITAL CENTER CENTRE STADIUM THEATRE THEATER GALLERY DISTRICT
    REGION EMPIRE DYNASTY ERA AGE LAW ACT TREATY PROJECT LICENSE SYSTEM NETWORK MAGAZINE MAGAZINES
    FILMS RECORDS PUBLICATIONS PUBLISHING STUDIOS PICTURES PRODUCTIONS ENTERTAINMENT INTERNATIONAL
    AIRLINES AIRWAYS LANGUAGE LANGUAGES SONATA SYMPHONY CONCERTO OPERA FICTION JOURNAL NEWSPAPER
    RADIO TELEVISION TV CHANNEL RAILWAY CLASS PRESS EDITION TOUR TRILOGY BEGINS RETURNS JANUARY
    FEBRUARY MARCH APRIL MAY JUNE JULY AUGUST SEPTEMBER OCTOBER NOVEMBER DECEMBER MONDAY TUESDAY
    WEDNESDAY THURSDAY FRIDAY SATURDAY SUNDAY SCIENCE MATHEMATICS HISTORY""".split()
)
# Words that make a nickname of a first name ("TINY TIM", "LITTLE FAN").
_NICKNAME_WORDS = frozenset("TINY LITTLE BIG".split())
# Words that say what kind of thing a name is without making it another thing
# ("HANNA-BARBERA PRODUCTIONS", "THE NEW YORKER MAGAZINE").
_CATEGORY_WORDS = frozenset("""PRODUCTIONS STUDIOS STUDIO PICTURES ENTERTAINMENT FILMS RECORDS RECORDINGS MAGAZINE
    NEWSPAPER RESORT BAND PUBLISHING PUBLISHERS""".split())
# Words that make a place or a thing another one ("West Bengal" is no "Bengal").
_MODIFIERS = frozenset(
    """NORTH SOUTH EAST WEST NORTHERN SOUTHERN EASTERN WESTERN CENTRAL UPPER LOWER GREATER NEW
    HIGH LOW GREAT INNER OUTER MIDDLE GRAND ROYAL NATIONAL""".split()
)
_TOKEN = re.compile(r"[^\W_]+(?:['-][^\W_]+)*", re.UNICODE)
_HYPHEN_BETWEEN_WORDS = re.compile(r"(?<=[^\W\d_]{2})-(?=[^\W\d_]{2})")
_DASH = re.compile(r"--+|[—–]")
_STUTTER = re.compile(r"([^\W\d_])\1{2,}")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_STOPWORDS = frozenset(
    """the and for that with was were his her him she they them their this from had has have
    are not but its into who which what when where been being also there than then said says
    one all any over out about after before more most other some such only very upon would
    could should will shall can may might mentioned text related is""".split()
)

# MinHash over character 3-grams: BANDS x ROWS signature, bucketed per band. Two names
# share a bucket with probability 1-(1-j^ROWS)^BANDS for 3-gram Jaccard j (about 0.5 at
# j = 0.6): spelling variants meet, unrelated names rarely do.
_BANDS, _ROWS = 6, 3
# Shorter names are looked up among the subsets of at most this many of a name's words.
_MAX_SUBSET_WORDS = 8
_DESCRIPTION_WORD = re.compile(r"(?<![\w'])[A-Za-z][a-z']*(?![\w'])")
_NUMBER_WORDS = frozenset("TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN BOTH ALL".split())
_PRONOUNS = {**dict.fromkeys("he his him himself".split(), "M"), **dict.fromkeys("she her hers herself".split(), "F")}
# What a description says someone is ("Old Fezziwig is a jovial old gentleman"): the noun of
# the phrase after "is a" / "was the", before any preposition, relative word or punctuation.
_GENDERED_NOUNS = {
    **dict.fromkeys("""man gentleman boy lad father son brother husband uncle nephew master king prince
        lord actor widower""".split(), "M"),
    **dict.fromkeys("""woman lady girl lass mother daughter sister wife aunt niece mistress queen princess
        matron actress widow""".split(), "F")}
_PREDICATE = re.compile(r"\b(?:is|was)\s+(?:a|an|the)\s+((?:(?!\b(?:of|who|whom|whose|that|which|with|to|in|at|"
                        r"for|from|by|on|and)\b)[a-z' -])+)")
_PRIME = (1 << 31) - 1
_PERMUTATIONS = [((i * 2654435761 + 97) % _PRIME or 1, (i * 40503 + 13) % _PRIME) for i in range(_BANDS * _ROWS)]


# --------------------------------------------------------------------------- names


def name_key(name: str) -> tuple[str, ...]:
    """The tokens that identify ``name``: upper case, punctuation and hyphens gone, a
    trailing possessive dropped (``SCROOGE'S`` -> ``SCROOGE``), leading articles,
    honorifics and descriptive words dropped, corporate suffixes dropped. A possessive
    inside the name stays (``SCROOGE'S NEPHEW`` is someone else)."""
    return _key(name, True)


def _surface_variants(a: str, b: str) -> bool:
    """Two names that differ only in spelling: case, punctuation, a possessive, an article
    (``BOB CRATCHIT'S`` / ``BOB CRATCHIT``), not a title or a descriptive word."""
    return _key(a, False) == _key(b, False)


def _folded(text: str) -> str:
    """Accents dropped: IMMERGLÜCK is IMMERGLUCK."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@lru_cache(maxsize=1 << 17)
def _key(name: str, drop_titles: bool) -> tuple[str, ...]:
    # A hyphen between words splits them ("CHRISTMAS-TIME"); one around a particle does not
    # ("JASHN-E-REKHTA" is one word, not "REKHTA").
    text = _folded(_normal(name).replace("’", "'"))
    # A dash breaks the sentence: a span across it ("EVE--OLD SCROOGE") names what follows.
    text = next((part for part in reversed(_DASH.split(text)) if part.strip()), text)
    tokens = _TOKEN.findall(_HYPHEN_BETWEEN_WORDS.sub(" ", text))
    if tokens:
        last = tokens[-1]
        if last.endswith("'S"):
            tokens[-1] = last[:-2]
    # Not before a connector: "PRINCE OF WALES" is no "OF WALES".
    # Nor before one word that cannot be a name by itself: KING COUNTY is no COUNTY.
    while len(tokens) > 1 and tokens[1] not in _CONNECTORS and (
            tokens[0] in _ARTICLES or drop_titles and (tokens[0] in _HONORIFICS or tokens[0] in _DESCRIPTIVE)
            and not (len(tokens) == 2 and tokens[1] in _GENERIC_HEADS)):
        tokens.pop(0)
    while len(tokens) > 1 and tokens[-1] in _CORPORATE:
        tokens.pop()
    if len(tokens) > 1 and tokens[0] == "ST":  # ST. LOUIS is SAINT LOUIS
        tokens[0] = "SAINT"
    # A stutter or a repeated word ("SCRO-O-O-OGE", "SCROOGE SCROOGE") names nothing new.
    key: list[str] = []
    for token in tokens:
        if "-" in token:  # what the hyphens left joined: a stutter, "SCRO-O-O-OGE" is SCROOGE
            token = _STUTTER.sub(r"\1\1", token.replace("-", ""))
        if token and (not key or key[-1] != token):
            key.append(token)
    if len(key) > 1 and all(len(t) == 1 for t in key):  # U.S., K.S.C.: one word
        key = ["".join(key)]
    # A span caught twice: "DEMON DICE DEMON DICE", "EXIES THE EXIES".
    for span in (key, [t for t in key if t not in _ARTICLES]):
        for size in range(1, len(span) // 2 + 1):
            if len(span) % size == 0 and span == span[:size] * (len(span) // size):
                return tuple(span[:size])
    return tuple(key)


def _acronym(key: tuple[str, ...]) -> Optional[str]:
    """``IRS`` for ``INTERNAL REVENUE SERVICE`` (connector words skipped)."""
    letters = [t[0] for t in key if t not in _CONNECTORS]
    return "".join(letters) if len(letters) >= 2 else None


@lru_cache(maxsize=1 << 17)
def gender(name: str) -> Optional[str]:
    """"M" or "F" when an honorific says so (``MRS. CRATCHIT``), else None."""
    for token in _TOKEN.findall(_normal(name)):
        if token in _ARTICLES or token in _DESCRIPTIVE:
            continue
        return _HONORIFICS.get(token)
    return None


def _initial_match(a: str, b: str) -> bool:
    return a == b or (len(a) == 1 and b.startswith(a)) or (len(b) == 1 and a.startswith(b))


def _relational(tokens: tuple[str, ...]) -> bool:
    """A name built from other names: a connector, an inner article ("SCROOGE THE
    BALEFUL") or an inner possessive."""
    return any(t in _CONNECTORS or t.endswith("'S") for t in tokens) or "THE" in tokens[1:]


@lru_cache(maxsize=1 << 17)
def _grams(name: str) -> frozenset[str]:
    text = f" {' '.join(name_key(name))} "
    return frozenset(text[i:i + 3] for i in range(max(1, len(text) - 2)))


def _gram_similarity(a: str, b: str) -> float:
    ga, gb = _grams(a), _grams(b)
    return len(ga & gb) / len(ga | gb) if ga and gb else 0.0


# --------------------------------------------------------------------------- look-alikes

# A roman numeral (I to XXXIX): a number in a name (WORLD WAR II, ELIZABETH I).
_ROMAN = re.compile(r"^(X{0,3})(IX|IV|V?I{0,3})$")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}
# An ordinal written with digits ("2ND", "21ST").
_DIGIT_ORDINAL = re.compile(r"^(\d+)(?:ST|ND|RD|TH|E|ER|ÈME|º|ª)?$")
# Generation suffixes of Western names: father and son share every other word.
_GENERATIONS = frozenset("JR SR".split())
# English numbers and ordinals as words (the general class: words that count or rank).
_NUMBER_VALUES = {word: i + 1 for i, word in enumerate(
    "ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE".split())}
_NUMBER_VALUES.update({word: i + 1 for i, word in enumerate(
    "FIRST SECOND THIRD FOURTH FIFTH SIXTH SEVENTH EIGHTH NINTH TENTH ELEVENTH TWELFTH".split())})


def _roman(token: str) -> Optional[int]:
    if not token or not _ROMAN.match(token):
        return None
    total = 0
    for i, letter in enumerate(token):
        value = _ROMAN_VALUES[letter]
        total += -value if i + 1 < len(token) and _ROMAN_VALUES[token[i + 1]] > value else value
    return total


def _numbers(key: tuple[str, ...]) -> tuple[int, ...]:
    """The numbers a name holds, however written: digits, an ordinal, a roman numeral (a
    lone letter only as the last word: J. MARLEY's J is an initial), a number word."""
    found = []
    for i, token in enumerate(key):
        digits = _DIGIT_ORDINAL.match(token)
        if digits:
            found.append(int(digits.group(1)))
        elif token in _NUMBER_VALUES:
            found.append(_NUMBER_VALUES[token])
        elif (len(token) > 1 or i == len(key) - 1 and len(key) > 1) and (value := _roman(token)):
            found.append(value)
    return tuple(sorted(found))


def _leading_initials(key: tuple[str, ...]) -> int:
    count = 0
    while count < len(key) - 1 and len(key[count]) == 1:
        count += 1
    return count


def _accented_key(name: str, key: str) -> str:
    """The one-word ``key`` of ``name`` with its accents, as the name writes it (KSČ is not
    K.S.C., whose keys are both KSC)."""
    letters = "".join(c for c in unicodedata.normalize("NFC", _normal(name)) if c.isalnum())
    return letters[-len(key):] if _folded(letters).endswith(key) else key


# Look-alike reasons no evidence overrides; a qualifier (``look_alike``) a model may.
_NEVER_ALIKE = frozenset({"number", "generation", "initials", "accents"})


def look_alike(a: str, b: str) -> Optional[str]:
    """Why two names that look alike name different things, from the names alone (None: no
    such reason). Rules never merge such a pair and never put it in one group:

    - ``number``: the numbers differ (WORLD WAR I / WORLD WAR II, 2ND / 3RD ARMY);
    - ``generation``: a generation suffix differs (JOHN SMITH JR. / JOHN SMITH);
    - ``initials``: initials stand where the other has a full first name (T.J. MILLER /
      TIM MILLER: J is not in TIM);
    - ``accents``: a short name that differs in its accents only (KSČ / K.S.C.);
    - ``qualifier``: one name is the other with words added around a connector (REPUBLIC OF
      THE CONGO / DEMOCRATIC REPUBLIC OF THE CONGO, DAVY JONES / DAVY JONES OF THE MONKEES),
      unless the shorter is a common noun with an article (THE CITY / CITY OF LONDON);
      only a model's verdict merges such a pair.
    """
    if a == b:
        return None
    ka, kb = name_key(a), name_key(b)
    if _numbers(ka) != _numbers(kb):
        return "number"
    if set(ka) & _GENERATIONS != set(kb) & _GENERATIONS:
        return "generation"
    for x, y in ((ka, kb), (kb, ka)):
        run = _leading_initials(x)
        if run >= 2 and len(y[0]) > 1 and not all(_initial_match(i, w) for i, w in zip(x[:run], y[:run])):
            return "initials"
    if ka == kb and len(ka) == 1 and len(ka[0]) <= 5 and _accented_key(a, ka[0]) != _accented_key(b, kb[0]):
        return "accents"
    if ka != kb and (_relational(ka) or _relational(kb)):
        short, long = sorted((ka, kb), key=len)
        added_at_an_end = long[:len(short)] == short or long[len(long) - len(short):] == short
        common_noun = len(short) == 1 and _normal(a if ka == short else b).split()[0] in _ARTICLES
        if added_at_an_end and not common_noun:
            return "qualifier"
    return None


def name_relation(a: str, b: str) -> Optional[str]:
    """How two names could denote one thing, from the names alone (None: they cannot):

    - ``same_key``: equal keys (``THE CRATCHIT FAMILY`` / ``CRATCHIT FAMILY``);
    - ``initials``: equal but for initials (``J. MARLEY`` / ``JACOB MARLEY``);
    - ``middle_name``: one adds middle names or initials (``JOHN T. DOE`` / ``JOHN DOE``);
    - ``acronym``: one is the other's initials (``IRS`` / ``INTERNAL REVENUE SERVICE``);
    - ``surname``, ``first_name``: a one-word name that ends or starts a person-like name;
    - ``overlap``: other shared words; ``fuzzy``: similar spelling only.
    """
    if a == b:
        return "same_key"
    told = look_alike(a, b)
    if told in _NEVER_ALIKE:
        return None
    if told:  # another thing, unless a model says otherwise
        return "overlap"
    ga, gb = gender(a), gender(b)
    if ga and gb and ga != gb:
        return None
    ka, kb = name_key(a), name_key(b)
    if not ka or not kb or ka == (ka[0][:1],) or kb == (kb[0][:1],):  # a lone letter names nothing
        return None
    if ka == kb:
        return "same_key"
    short, long = (ka, kb) if (len(ka), ka) <= (len(kb), kb) else (kb, ka)
    if len(short) == 1 and len(long) >= 2 and short[0] == _acronym(long):
        return "acronym"
    if len(short) == len(long) and all(_initial_match(x, y) for x, y in zip(short, long)):
        return "initials"
    owned_a, owned_b = owned(a), owned(b)
    if owned_a and owned_a == owned_b and (designation(a) is None) != (designation(b) is None):
        return "possessive"  # MARLEY'S GHOST / GHOST OF JACOB MARLEY
    if owned_a and kb == owned_a[1] or owned_b and ka == owned_b[1]:
        return "head"  # THE CLERK / SCROOGE'S CLERK
    if _relational(long) and not _relational(short):
        return "overlap" if set(short) & set(long) else None
    if len(short) >= 2 and _initial_match(short[0], long[0]) and _initial_match(short[-1], long[-1]) \
            and all(len(t) == 1 or t in short for t in long[1:-1]) and set(short) <= set(long) | set(short[:1]):
        return "middle_name"
    if len(short) == 2 and len(long) in (3, 4) and short[0] == long[0] and short[-1] == long[-1] \
            and not set(long) & (_GENERIC_HEADS | _CONNECTORS | _MODIFIERS):
        return "extended_name"  # ADAM FREDRIC DURITZ / ADAM DURITZ
    for nick, full in ((ka, kb), (kb, ka)):
        if len(nick) == 2 and nick[0] in _NICKNAME_WORDS and 2 <= len(full) <= 3 and full[0] == nick[1]:
            return "first_name"  # TINY TIM / TIM CRATCHIT
    if long[:-1] == short and long[-1] in _CATEGORY_WORDS:
        return "category"  # HANNA-BARBERA PRODUCTIONS / HANNA-BARBERA
    if set(short) <= set(long):
        extra = set(long) - set(short)
        if long[-1] in _GENERIC_HEADS or short[-1] in _GENERIC_HEADS or extra & _MODIFIERS:
            return "overlap"
        if len(short) == 1 and len(long) <= 3:
            if short[0] == long[-1]:
                return "surname"
            if short[0] == long[0]:
                return "first_name"
        if len(short) > 1 and long[-len(short):] == short:
            return "surname"
        return "overlap"
    if set(short) & set(long):
        return "overlap"
    return "fuzzy" if _gram_similarity(a, b) >= 0.5 else None


def _signature(name: str) -> list[int]:
    hashes = [zlib.crc32(g.encode("utf-8")) for g in _grams(name)]
    return [min((x * h + y) % _PRIME for h in hashes) for x, y in _PERMUTATIONS]


@lru_cache(maxsize=1 << 17)
def _indexed_blocks(name: str) -> tuple[tuple[Any, ...], ...]:
    """The blocking keys ``name`` is indexed under: its key, its set of words, its acronym,
    each word, the shape of its initials."""
    key = name_key(name)
    blocks: list[tuple[Any, ...]] = [("key", key), ("words", tuple(sorted(set(key)))),
                                     *(("token", t) for t in sorted(set(key)) if len(t) > 1)]
    # An acronym meets the names it could stand for (not other names with the same initials).
    if len(key) > 1 and (acronym := _acronym(key)):
        blocks.append(("expands", acronym))
    elif len(key) == 1 and 2 <= len(key[0]) <= 6:
        blocks.append(("acronym", key[0]))
    if 2 <= len(key) <= 3:  # where a one-word name may be its first name or its surname
        blocks += [("first", key[0]), ("last", key[-1])]
    if len(key) == 2 and key[0] in _NICKNAME_WORDS:  # "TINY TIM" meets "TIM CRATCHIT"
        blocks.append(("nickname", key[1]))
    if found := designation(name):  # "SCROOGE'S PARTNER" meets what is said to be Scrooge's partner
        blocks.append(("designation", found[0], found[1][-1]))
    if found := owned(name):  # ... and "GHOST OF JACOB MARLEY" meets "MARLEY'S GHOST", "THE GHOST"
        blocks += [("owned", *found), ("head", found[1])]
    if len(key) > 1:  # "J. MARLEY" meets "JACOB MARLEY" by the shape of their initials
        shape = tuple(t[0] for t in key)
        blocks.append(("shape", shape))
        if any(len(t) == 1 for t in key):
            blocks.append(("shape-with-initial", shape))
    return tuple(blocks)


@lru_cache(maxsize=1 << 16)
def _looked_up_blocks(name: str) -> tuple[tuple[Any, ...], ...]:
    """The blocking keys looked up for ``name``: its key, acronym and shape, and every part
    of its set of words (the shorter names inside it). The fuller names that hold all its
    words are found from its words' postings (see :meth:`NameIndex.candidates`)."""
    key = name_key(name)
    flipped = {"acronym": "expands", "expands": "acronym"}
    own = [(flipped.get(b[0], b[0]), *b[1:]) for b in _indexed_blocks(name) if b[0] in ("key", "words", *flipped)]
    parts = sorted(set(key))[:_MAX_SUBSET_WORDS]
    own += [("words", c) for size in range(1, len(parts)) for c in combinations(parts, size)]
    own.append(("head", key))
    if len(key) == 2 and key[0] in _NICKNAME_WORDS:
        own.append(("first", key[1]))
    if 2 <= len(key) <= 3:
        own.append(("nickname", key[0]))
    if found := owned(name):
        own += [("owned", *found), ("key", found[1])]
    if len(key) > 1:
        shape = tuple(t[0] for t in key)
        own.append(("shape-with-initial", shape))
        if any(len(t) == 1 for t in key):
            own.append(("shape", shape))
    return tuple(own)


@lru_cache(maxsize=1 << 17)
def _bands(name: str) -> tuple[tuple[Any, ...], ...]:
    signature = _signature(name)
    return tuple(("lsh", i, *signature[i * _ROWS:(i + 1) * _ROWS]) for i in range(_BANDS))


# Relations only a model or a person can settle: a shared word, a similar spelling, or
# (``similar``, from embedding blocking) nothing in the names but what they describe.
UNSETTLED_RELATIONS = frozenset({"overlap", "fuzzy", "similar"})


class NameIndex:
    """Blocking index over every name of the graph: which names are worth comparing with
    a given one. Membership of a pair depends on the two names only, never on what else
    is indexed, so candidate pairs do not depend on the order documents came in.

    ``loose``: also every name sharing a word or an LSH bucket (spelling variants, shared
    words), and the pairs whose names only share words or spelling (``UNSETTLED_RELATIONS``): pairs
    only a model or a person can settle, so only looked up for them.
    """

    def __init__(self, names: Iterable[str] = (), loose: bool = False) -> None:
        self.loose = loose
        self.names: set[str] = set()
        # Most blocks hold one name: kept as the bare string, a set only from the second on
        # (tens of thousands of small sets would weigh on every garbage collection).
        self._buckets: dict[tuple[Any, ...], Union[str, set[str]]] = {}
        self.update(names, ())

    def update(self, added: Iterable[str], removed: Iterable[str]) -> None:
        buckets = self._buckets
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
        for name in added:
            self.names.add(name)
            for block in self._blocks_of(name):
                bucket = buckets.get(block)
                if bucket is None:
                    buckets[block] = name
                elif isinstance(bucket, set):
                    bucket.add(name)
                elif bucket != name:
                    buckets[block] = {bucket, name}

    def _bucket(self, block: tuple[Any, ...]) -> set[str]:
        found = self._buckets.get(block)
        return {found} if isinstance(found, str) else found or set()

    def _blocks_of(self, name: str) -> tuple[tuple[Any, ...], ...]:
        return _indexed_blocks(name) + (_bands(name) if self.loose else ())

    def claimed(self, claim: str) -> set[str]:
        """Indexed names a description's claim key (:func:`description_claims`) may name."""
        kind, _, rest = claim.partition(" ")
        block = ("key", tuple(rest.split())) if kind == "K" else ("designation", *rest.split())
        return self._bucket(block)

    def candidates(self, name: str) -> dict[str, str]:
        """Indexed names that could denote the same thing as ``name``, each with its
        :func:`name_relation`."""
        seen: set[str] = set()
        for block in _looked_up_blocks(name):
            seen |= self._bucket(block)
        words = [b for b in _indexed_blocks(name) if b[0] == "token"]
        if len(words) == 1 and not self.loose:
            # A one-word name is settled only as the first or last word of a name of two or
            # three (a first name, a surname): those, not every name with the word in it.
            for end in ("first", "last"):
                seen |= self._bucket((end, words[0][1]))
        else:
            postings = sorted((self._bucket(b) for b in words), key=len)
            if postings:  # fuller names holding every word of this one
                seen |= set.intersection(*postings)
        if self.loose:
            for block in [*words, *_bands(name)]:
                seen |= self._bucket(block)
        seen.discard(name)
        found = {}
        for other in seen:
            relation = name_relation(name, other)
            if relation is not None and (self.loose or relation not in UNSETTLED_RELATIONS):
                found[other] = relation
        return found


def similar_pairs(vectors: Mapping[str, Any], names: Iterable[str], threshold: float) -> set[tuple[str, str]]:
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
    def described(self) -> bool:
        """A description, not a name: the descriptions write each of its words in lower case
        somewhere ("the lonely boy", "her father"), as no text writes a proper name. Two
        such names sharing words ("THE GIRL", "THE FAIR YOUNG GIRL") need not be one thing."""
        return {t.lower() for t in name_key(self.name)} <= self._description_words[0]

    @cached_property
    def _description_words(self) -> tuple[set[str], Counter, set[str]]:
        """The words the descriptions write in lower case, their pronouns by gender, and
        what they say the name is (the nouns after "is a", "was the")."""
        lower: set[str] = set()
        pronouns: Counter = Counter()
        roles: set[str] = set()
        for text in self.descriptions.values():
            for word in _DESCRIPTION_WORD.findall(text):
                if word[0].islower():
                    lower.add(word)
                gendered = _PRONOUNS.get(word.lower())
                if gendered:
                    pronouns[gendered] += 1
            said = _PREDICATE.search(text.lower())
            gendered = next((g for w in said.group(1).split() if (g := _GENDERED_NOUNS.get(w))), None) if said else None
            if gendered:
                pronouns[gendered] += 1
            if said and said.group(1).split() and self._subject_of(text, said.start()):
                roles.add(said.group(1).split()[-1])
        return lower, pronouns, roles

    def _subject_of(self, text: str, at: int) -> bool:
        """Whether the clause before ``at`` names this name ("Old Joe is ..."; not "he was ...")."""
        start = max(text.rfind(c, 0, at) for c in ".;!?") + 1
        words = _PLAIN_WORD.findall(text[start:at])
        if words and words[-1].lower() in _OTHER_SUBJECTS:
            return False
        return bool({w.upper() for w in words} & set(name_key(self.name)))

    @property
    def roles(self) -> set[str]:
        """What the descriptions say the name is: "jester", "dealer"."""
        return self._description_words[2]

    @cached_property
    def text(self) -> str:
        """The descriptions in lower case (to look for a word cheaply)."""
        return "\n".join(self.descriptions.values()).lower()

    @cached_property
    def claims(self) -> set[str]:
        """What the descriptions state this name is (:func:`description_claims`)."""
        return {c for text in self.descriptions.values() for c in description_claims(self.name, text)}

    @cached_property
    def plural(self) -> bool:
        """A group's name, as the descriptions' verbs say ("The young Cratchits are ...")."""
        last = self.name.split()[-1]
        if not last.endswith("S") or last.endswith(("'S", "SS")):
            return False
        agreeing = re.compile(rf"(?<!\w){re.escape(last.lower())}\s+(?:are|were|have)\b")
        return any(agreeing.search(text.lower()) for text in self.descriptions.values())

    @cached_property
    def pronoun_gender(self) -> Optional[str]:
        """"M" or "F" when the descriptions' pronouns clearly say so ("... with his wife")."""
        counts = self._description_words[1]
        male, female = counts["M"], counts["F"]
        if male >= 2 and male >= 3 * female:
            return "M"
        if female >= 2 and female >= 3 * male:
            return "F"
        return None


# --------------------------------------------------------------------------- stated identities

# What a description states its name is. A designation: "Jacob Marley was Scrooge's partner",
# "Mrs. Cratchit is the wife of Bob Cratchit" (an owner, a proper word, and a common noun);
# another name: "Bob Cratchit, also called Robert", "Scrooge's nephew, called Fred".
_COPULA = r"\b(?:is|was)\s+(?:(?:also|now|once|still|only|in fact)\s+)?"
_POSSESSIVE_START = r"(?:[A-Z][\w.'-]*\s+){0,3}?([A-Z][\w-]*)['’]s\s"
_OF_START = r"(?:the|a|an)\s+((?:[a-z][a-z-]*\s+){0,3}?)(?:of|to)\s+(?:the\s+)?"
_POSSESSED = re.compile(_COPULA + _POSSESSIVE_START + r"+((?:[a-z][a-z-]*\s*){1,4})")
_OF_OWNER = re.compile(_COPULA + _OF_START + r"(?:[A-Z][\w.'-]*\s+){0,3}?([A-Z][\w-]*)(?![\w'-]*\s+[A-Z])")
# Either, in one scan of a text: most texts have neither.
_DESIGNATED = re.compile(_COPULA + f"(?:{_POSSESSIVE_START}|{_OF_START}[A-Z])")
_NAMING_WORDS = ("known as", "called", "named", "dubbed", "aka", "a.k.a")
_NAMED_AS = re.compile(r"\b(?:(renamed(?:\s+as|\s+to)?|changed\s+its\s+name\s+to)|known\s+as|called|named|nicknamed"
                       r"|dubbed|a\.k\.a\.?|aka)\s+(?:the\s+)?[\"'“‘]?([A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*){0,4})")
# What stands before a naming word that names, not a verb ("Scrooge called Bob in"): a comma
# or a parenthesis, or an adverb ("also called").
_NAMING_LEAD = re.compile(r"(?:[,(]\s*|\s(?:also|better|commonly|otherwise|often|sometimes|popularly|"
                          r"affectionately|simply)\s+|\s(formerly|previously|originally|later|now)\s+)$")
# One more name of a list after a naming word: ", Chubby", "or the World Wrestling Federation".
_LISTED_NAME = re.compile(r"[\"'”’]?\s*(?:,\s*(?:or\s+|and\s+)?|\s+(?:or|and)\s+)(?:the\s+)?[\"'“‘]?"
                          r"([A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*){0,4})")
# An acronym in brackets ("(WWF)").
_BRACKETED = re.compile(r"\(\s*([A-Z][A-Z.&-]+)\s*\)")
# A designation's head stops at a word that starts another phrase ("and" does not: "Scrooge's
# old friend and partner").
_HEAD_STOP = frozenset("""who whom whose which that or but with in at of for to from on by as is was
    during since when where while after before until""".split())
# Lower-case words inside a name ("School for Boys", "Mallik Rehan Dargah in Sira").
_JOINING = frozenset("of and with from for to the de du da del von van in on at &".split())
_NAME_GOES_ON = re.compile(r"\s+(?:of|from|with|for|the|de|du|da|del|von|van|in|on|at)\s+[A-Z]")
# A sentence ends at a stop, not after an initial or a title ("E. B. White", "Mr. Cratchit").
_SENTENCE = re.compile(r"(?<=[.!?;])(?<!\b[A-Z]\.)(?<!\bMr\.)(?<!\bMrs\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)"
                       r"(?<!\bJr\.)(?<!\bSr\.)\s+")
_SUBJECT_PRONOUNS = frozenset("he she it they this".split())
# A word of running text, hyphens splitting it as they split a name's key ("counting-house").
_PLAIN_WORD = re.compile(r"[^\W_]+")
# Words right before "is a" that make someone else the subject ("Bob said he was a ...").
_OTHER_SUBJECTS = _SUBJECT_PRONOUNS | frozenset("who which that there i we you".split())


def _inside_a_name(words: list[str], start: int) -> bool:
    """Whether the words from ``start`` end a longer name ("Christmas with The Brady Bunch",
    "Labour Council of South Australia")."""
    previous = words[start - 1] if start > 0 else ""
    if previous[:1].isupper():
        return True
    return previous in _JOINING and start > 1 and words[start - 2][:1].isupper()


@lru_cache(maxsize=1 << 17)
def designation(name: str) -> Optional[tuple[str, tuple[str, ...]]]:
    """The owner and head of a name that designates something by another name's
    (``SCROOGE'S PARTNER``: SCROOGE, (PARTNER,)); None for other names."""
    key = name_key(name)
    inner = [i for i, t in enumerate(key[:-1]) if t.endswith("'S")]
    if not inner or len(key) - inner[-1] - 1 > 3:
        return None
    return key[inner[-1]][:-2], key[inner[-1] + 1:]


@lru_cache(maxsize=1 << 17)
def owned(name: str) -> Optional[tuple[str, tuple[str, ...]]]:
    """The owner's last word and the head of a designation in either form: SCROOGE'S
    PARTNER, GHOST OF JACOB MARLEY (MARLEY, (GHOST,)); None for other names."""
    found = designation(name)
    key = name_key(name)
    if found is None and "OF" in key[1:4]:
        at = key.index("OF")
        owner = [t for t in key[at + 1:] if t not in _ARTICLES]
        if owner:
            found = owner[-1][:-2] if owner[-1].endswith("'S") else owner[-1], key[:at]
    return found


def description_claims(name: str, text: str) -> set[str]:
    """What ``text``, a description of ``name``, states the name is, as claim keys:
    ``D OWNER WORD`` for each word of a designation it is given (its subject must be the
    name or a pronoun), ``K TOKENS`` for another name it is called or was renamed."""
    claims: set[str] = set()
    designated = _DESIGNATED.search(text) is not None
    naming = any(word in text for word in _NAMING_WORDS)
    bracketed = _BRACKETED.search(text) is not None
    if not designated and not naming and not bracketed:  # most descriptions: nothing to read
        return claims
    own = name_key(name)
    for sentence in _SENTENCE.split(text):
        if designated:
            claims |= _designation_claims(sentence, own)
        if naming:
            claims |= _naming_claims(sentence, own)
        if bracketed:
            claims |= _bracket_claims(sentence, own)
    return claims


def _designation_claims(sentence: str, own: tuple[str, ...]) -> set[str]:
    """"Jacob Marley was Scrooge's partner": D SCROOGE PARTNER."""
    claims: set[str] = set()
    own_words = {t.lower() for t in own} | _SUBJECT_PRONOUNS
    for pattern in (_POSSESSED, _OF_OWNER):
        for match in pattern.finditer(sentence):
            if not set(_PLAIN_WORD.findall(sentence[:match.start()].lower())) & own_words:
                continue
            owner, head = (match.group(1), match.group(2)) if pattern is _POSSESSED else (match.group(2), match.group(1))
            words: list[str] = []
            for word in head.split():
                if word in _HEAD_STOP:
                    break
                words += word.split("-")
            owner_key = name_key(owner)
            if words and owner_key:
                claims.update(f"D {owner_key[-1]} {w.upper()}" for w in words)
    return claims


def _naming_claims(sentence: str, own: tuple[str, ...]) -> set[str]:
    """"Bob, also called Robert", "Tim Cratchit, known as Tiny Tim" (said in Tiny Tim's
    description), "The Barion cut ... has been renamed the Princess cut"."""
    claims: set[str] = set()
    for match in _NAMED_AS.finditer(sentence):
        lead = _NAMING_LEAD.search(sentence[max(0, match.start() - 20):match.start()])
        history = match.group(1) is not None or lead is not None and lead.group(1) is not None
        if lead is None and not history:
            continue  # a verb: "Scrooge called Bob in"
        before = sentence[:match.start() - (len(lead.group()) if lead else 0)]
        if before.rstrip(" ,").endswith(")") or _NAME_GOES_ON.match(sentence, match.end()):
            continue  # a parenthesis or a longer name around the cue: which name is which is unclear
        other = name_key(match.group(2))
        words = [w.strip(",(") for w in before.split()[-10:]]
        said_of = _name_at_end(words, own)
        if other and other != own and (said_of is not None and not _inside_a_name(words, said_of)
                                        or history and _opens_with(sentence, own)):
            claims.add("K " + " ".join(other))
            # A list of names: "also known as Junior Byles, Chubby, or King Chubby".
            at = match.end()
            while more := _LISTED_NAME.match(sentence, at):
                if _NAME_GOES_ON.match(sentence, more.end()):
                    break
                if (listed := name_key(more.group(1))) and listed != own:
                    claims.add("K " + " ".join(listed))
                at = more.end()
        elif other == own and words:
            start = len(words)
            while start > 0 and words[start - 1][:1].isupper():
                start -= 1
            before_key = name_key(" ".join(words[start:])) if start < len(words) else ()
            if before_key and before_key != own and not _inside_a_name(words, start):
                claims.add("K " + " ".join(before_key))
    return claims


def _bracket_claims(sentence: str, own: tuple[str, ...]) -> set[str]:
    """"The World Wrestling Federation (WWF)": the name's acronym in brackets right after it
    (other names in brackets are too often a place, a year or a role: "Alexandria
    International Airport (Louisiana)", "Anne Hathaway (Selina Kyle)")."""
    acronym = _acronym(own)
    claims: set[str] = set()
    for match in _BRACKETED.finditer(sentence) if acronym else ():
        words = sentence[:match.start()].split()[-8:]
        said_of = _name_at_end(words, own)
        if said_of is not None and name_key(match.group(1)) == (acronym,):
            claims.add(f"K {acronym}")
    return claims


def _name_at_end(words: list[str], own: tuple[str, ...]) -> Optional[int]:
    """Where the name starts if ``words`` end with it ("Scrooge's nephew" in "... of Scrooge's nephew")."""
    return next((i for i in range(len(words)) if name_key(" ".join(words[i:])) == own), None)


def _opens_with(sentence: str, own: tuple[str, ...]) -> bool:
    """Whether the sentence starts with the name (the subject of what it says)."""
    words = sentence.split()[:len(own) + 3]
    return any(name_key(" ".join(words[:i])) == own for i in range(1, len(words) + 1))


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
    for ent in extraction.get("entities", []):
        name = _normal(ent["name"])
        if name and ent.get("description") and name not in seen:
            seen.add(name)
            claims.update((name, claim) for claim in description_claims(name, str(ent["description"])))
    return claims


def raw_names(extraction: ChunkExtraction) -> set[str]:
    """Every normalised name a chunk's extraction mentions (entities and relation ends)."""
    names = {_normal(e["name"]) for e in extraction.get("entities", [])}
    for rel in extraction.get("relations", []):
        names.add(_normal(rel["source"]))
        names.add(_normal(rel["target"]))
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
            name = _normal(ent["name"])
            if name in names:
                p = profile(name)
                p.types[str(ent.get("type") or "UNKNOWN").upper()] += 1
                p.words.update(w for w in _WORD.findall(str(ent.get("description", "")).lower())
                               if w not in _STOPWORDS)
                p.chunks.add(chunk_id)
                if ent.get("description"):
                    p.descriptions.setdefault(chunk_id, str(ent["description"]))
        for rel in extraction.get("relations", []):
            src, tgt = _normal(rel["source"]), _normal(rel["target"])
            for end, other in ((src, tgt), (tgt, src)):
                if end in names and other and other != end:
                    p = profile(end)
                    p.neighbours.add(other)
                    p.chunks.add(chunk_id)
    for p in profiles.values():
        for own in p.name.lower().split():
            p.words.pop(own, None)  # a description naming its entity says nothing about a match
    return profiles


def _cosine(pa: NameProfile, pb: NameProfile) -> float:
    """Cosine of the two profiles' description words."""
    if not pa.words or not pb.words:
        return 0.0
    small, large = sorted((pa.words, pb.words), key=len)
    return sum(v * large.get(k, 0) for k, v in small.items()) / (pa.norm * pb.norm)


_BASE = {"same_key": 0.8, "initials": 0.75, "middle_name": 0.75, "surname": 0.6, "first_name": 0.55,
         "acronym": 0.55, "stated": 0.8, "possessive": 0.75, "head": 0.6, "extended_name": 0.6,
         "category": 0.6, "overlap": 0.2, "fuzzy": 0.2, "similar": 0.2}
# Names that differ only in spelling start higher than a title apart; a type disagreement
# weighs against equal keys without vetoing them; a chunk in common counts for a pair.
_SURFACE, _KEY_TYPE_CONFLICT, _SAME_CHUNK = 0.9, -0.2, 0.1
# Relations that, alone, allow two names in one group (the others need an accepted pair).
_COMPATIBLE = frozenset(_BASE) - UNSETTLED_RELATIONS - {"acronym"}
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
    # for several stays alone (CRATCHIT: BOB CRATCHIT, MARTHA CRATCHIT).
    part: bool = False
    # Not merged on its own, but merged if either name's group holds a titled name.
    if_person: bool = False


def _tells_of(p: NameProfile, owner: str) -> bool:
    """Whether a profile's neighbours or descriptions name ``owner`` (a proper word)."""
    if any(name_key(n)[-1:] in ((owner,), (owner + "'S",)) for n in p.neighbours):
        return True
    word = re.compile(rf"(?<![\w-]){re.escape(owner.capitalize())}(?![\w-])")
    return any(word.search(text) for text in p.descriptions.values())


def _incorporated(name: str) -> bool:
    """A company's legal name: a corporate suffix ends it (``THE CARTOON NETWORK, INC.``)."""
    tokens = _TOKEN.findall(_normal(name))
    return len(tokens) > 1 and tokens[-1] in _CORPORATE


def _told_apart(pa: NameProfile, pb: NameProfile) -> bool:
    """A company and what bears its name without the suffix, which their descriptions tell
    apart: "Cartoon Network is a channel owned by The Cartoon Network, Inc.", "The Cartoon
    Network, Inc. is the company that owns Cartoon Network"."""
    if _incorporated(pa.name) == _incorporated(pb.name):
        return False
    company, other = (pa, pb) if _incorporated(pa.name) else (pb, pa)
    words = [re.escape(t.lower()) for t in _TOKEN.findall(_normal(company.name))]
    if re.search(r"(?<!\w)" + r"\W+".join(words) + r"(?!\w)", other.text):
        return True
    # Named as another thing, the object of a word in lower case ("owns Cartoon Network"), not
    # followed by the suffix (its own name) or by another word of a name.
    bare = r"\W+".join(re.escape(t) for t in name_key(other.name))
    suffixes = "|".join(sorted(_CORPORATE))
    pattern = re.compile(rf"(?<![\w,])[a-z]+\s+(?:the\s+)?(?i:{bare})(?!\w)(?!(?i:\W{{0,2}}(?:{suffixes}))\b)"
                         r"(?!\s+[A-Z])")
    return any(pattern.search(text) for text in company.descriptions.values())


def _article_led(name: str) -> bool:
    words = _normal(name).split()
    return bool(words) and words[0] in _ARTICLES


def _qualified(a: str, b: str) -> bool:
    """Whether one name adds a qualifier to the other, beyond articles and counts: of a group,
    "THE YOUNG CRATCHITS" are some of "THE CRATCHITS"; "THREE SPIRITS" are "THE SPIRITS"."""
    return set(_key(a, False)) - _NUMBER_WORDS != set(_key(b, False)) - _NUMBER_WORDS


def decide_pair(pa: NameProfile, pb: NameProfile, relation: str, *, threshold: float,
                ask_threshold: float) -> PairDecision:
    """Score a candidate pair from the name relation and the evidence of both profiles.

    Types that disagree (both known) count heavily against; shared neighbours, similar
    descriptions and agreeing person cues count for. Genders that disagree (a title, or the
    descriptions' pronouns) keep the names apart; a description rather than a name ("THE
    GIRL"), or a group's name with a qualifier ("THE YOUNG CRATCHITS"), merges only with a
    model's word. ``threshold`` is where a merge starts;
    pairs between ``ask_threshold`` and it, from a weaker name relation, are ambiguous.
    """
    a, b = sorted((pa.name, pb.name))
    ta, tb = pa.type, pb.type
    told = look_alike(a, b)
    if told in _NEVER_ALIKE:  # whatever else the pair shares, the names say two things (WORLD WAR I / II)
        return PairDecision(a, b, relation, 0.0, "distinct", {"relation": relation, "look_alike": told})
    # A description stating the other name ("Fred is Scrooge's nephew") is the relation itself.
    if relation == "stated" and not _states(pa, pb):
        return PairDecision(a, b, relation, 0.0, "distinct", {"relation": relation, "stated": False})
    shared = sorted((pa.neighbours & pb.neighbours) - {pa.name, pb.name})
    description = _cosine(pa, pb)
    # One text using both names: a short form after the full one is the same thing; two
    # full names sharing a word ("BOB CRATCHIT", "TIM CRATCHIT") are two things named apart.
    same_chunk = bool(pa.chunks & pb.chunks) and relation not in UNSETTLED_RELATIONS
    corroborated = relation == "stated" or bool(shared) or description >= 0.2
    typed = ta != "UNKNOWN" and tb != "UNKNOWN"
    if not corroborated and (relation in _PARTS or relation == "acronym" or relation == "same_key" and typed and ta != tb):
        corroborated = _states(pa, pb)  # only where something in common is asked for: it reads every description
    genders = {gender(pa.name) or pa.pronoun_gender, gender(pb.name) or pb.pronoun_gender} - {None}
    surface = relation == "same_key" and _surface_variants(a, b)
    score = (_SURFACE if surface else _BASE[relation]) + 0.1 * min(len(shared), 3) + 0.5 * description \
        + _SAME_CHUNK * same_chunk
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
    if relation in _PERSON_PARTS:
        # Part of a person's name; of anything else ("CHRISTMAS" / "MERRY CHRISTMAS") it is not.
        if person:
            score += 0.1
        elif {ta, tb} - {"UNKNOWN"}:
            score -= 0.5
        # With nothing saying it is a person, a part of a name stands for the whole only
        # where a text used both (a surname after the full name), never a first name alone;
        # and the descriptions must agree ("Film Victoria" is described apart from
        # "Victoria"; "Schubert" in the sentences about "Franz Schubert").
        # Untyped names that would merge as parts of a person's name: they do when their
        # group turns out to be a person (a titled name in it: "MR. EBENEZER SCROOGE").
        if_person = (not person and ta == tb == "UNKNOWN" and corroborated
                     and round(score + 0.1, 4) >= threshold)
        corroborated = corroborated and (person or relation == "surname" and bool(pa.chunks & pb.chunks)
                                         and description >= 0.3)
        # Said to be different things ("a jester", "a dealer"): JOE MILLER is no OLD JOE.
        if pa.roles and pb.roles and not pa.roles & pb.roles:
            corroborated = if_person = False
    else:
        if_person = False
    if relation == "same_key" and not surface and not (person and (corroborated or same_chunk)):
        # A title or a descriptive word dropped (JUDGE DREDD / DREDD, OLD TRAFFORD / TRAFFORD):
        # a person's name and something else in common, or no merge.
        corroborated = relation_ok = False
    if relation == "same_key" and _relational(name_key(a)) and _article_led(a) != _article_led(b) \
            and not (shared or description >= 0.2):
        # A leading article on a title (THE JEWEL OF THE NILE, a film; JEWEL OF THE NILE, the
        # jewel in it): one thing only with a neighbour or the words of the descriptions in common.
        relation_ok = False
    if relation == "extended_name" and not person:
        corroborated = False  # "VIETNAMESE PRODIGY" is no part of "VIETNAMESE FINE ARTS PRODIGY"
    if relation == "category" and not (typed and ta == tb):
        corroborated = False  # a film "X" and its studio "X PICTURES" are typed apart
    if relation == "head":
        # "THE CLERK" is "SCROOGE'S CLERK" where it is told of with Scrooge.
        owner = (owned(a) or owned(b))[0]  # type: ignore[index]
        bare = pa if owned(pb.name) else pb
        # A one-word head names the designation only as a common noun ("the clerk"), not as a
        # word of its own ("DEATH" / "DEATH OF COLONEL BLIMP").
        common = len(name_key(bare.name)) > 1 or bare.described or _normal(bare.name).split()[0] in _ARTICLES
        corroborated = common and _tells_of(bare, owner)
        score += 0.1 * corroborated
    score = round(score, 4)
    # A part of a name, an acronym or a shared word is one thing only with something else
    # in common; similar spelling or shared words alone never merge without a model.
    apart = relation == "same_key" and _told_apart(pa, pb)
    if len(genders) > 1 or apart:  # "FEZZIWIG" described with "his wife" is no "MRS. FEZZIWIG"
        verdict, if_person = "distinct", False
    elif score >= threshold and relation not in UNSETTLED_RELATIONS and relation_ok \
            and (corroborated or relation in _COMPATIBLE - _PARTS) \
            and (relation in ("stated", "head", "possessive") or not (pa.described or pb.described)) \
            and not ((pa.plural or pb.plural) and _qualified(a, b)) and not told:
        verdict = "merge"
    elif score >= ask_threshold and relation not in ("initials", "middle_name"):
        verdict = "ask"
    else:
        verdict = "distinct"
    evidence = {"relation": relation, "types": [ta, tb] if a == pa.name else [tb, ta],
                "shared_neighbours": shared[:5], "shared_neighbour_count": len(shared),
                "description_similarity": round(description, 3), "same_chunk": same_chunk}
    if len(genders) > 1:
        evidence["genders"] = "conflict"
    if apart:
        evidence["told_apart"] = True
    for flag in ("described", "plural"):
        if getattr(pa, flag) or getattr(pb, flag):
            evidence[flag] = sorted(p.name for p in (pa, pb) if getattr(p, flag))
    # A part of a name counts towards its ambiguity only if it could be that person.
    # So is a designation: one said of two people ("BOB'S SON": PETER, TIM) stays alone; and
    # a head that could be two designations' ("THE CLERK": SCROOGE'S, FEZZIWIG'S).
    part = (relation in _PARTS or relation == "stated" and bool(designation(a) or designation(b))) \
        and len(genders) < 2
    return PairDecision(a, b, relation, score, verdict, evidence, part=part,
                        if_person=if_person and verdict != "merge")


def parse_verdicts(answer: str, count: int) -> dict[int, bool]:
    """Read ``<n>: yes|no`` lines of a model's answer to the resolution prompt."""
    found: dict[int, bool] = {}
    for match in re.finditer(r"(?m)^\W*(\d+)\W+(yes|no|same|different)\b", answer, re.IGNORECASE):
        index = int(match.group(1))
        if 1 <= index <= count:
            found.setdefault(index, match.group(2).lower() in ("yes", "same"))
    return found


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


# The version of the rules the derived record was decided by: a record of other rules is
# decided again in full by the next write (its decisions would not be a fresh index's).
RULES = 4


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
    # The fingerprint of the manual decisions ``aliases`` was grouped with (None: unknown).
    manual: Optional[str] = None
    # What descriptions state names are: (name, claim key, chunk id), so a name another
    # chunk is said to be is found from either side (:func:`chunk_claims`).
    claims: set[tuple[str, str, str]] = field(default_factory=set)

    @classmethod
    def from_stored(cls, record: Optional[Mapping[str, Any]]) -> Optional["ResolutionState"]:
        if not record:
            return None

        def pairs(key: str) -> set[tuple[str, str]]:
            return {tuple(p) for p in record.get(key) or []}  # type: ignore[misc]

        return cls(names=set(record.get("names") or []), pairs=pairs("pairs"), aliases=dict(record.get("aliases") or {}),
                   parts=pairs("parts"), person_pairs=pairs("person_pairs"), manual=record.get("manual"),
                   claims={tuple(c) for c in record.get("claims") or []})  # type: ignore[misc]


def _completeness(name: str) -> tuple:
    """Sort key of the name a group keeps: a name rather than a designation, most
    identifying words, then a plain name (no honorific or article around it), then the
    shortest, then alphabetical."""
    key = name_key(name)
    return (designation(name) is not None, -len(key), name != " ".join(key), len(name), name)


def _titled(name: str) -> bool:
    """A title before a name (``MR. EBENEZER SCROOGE``): the name is a person's."""
    tokens = [t for t in _TOKEN.findall(_normal(name)) if t not in _ARTICLES and t not in _DESCRIPTIVE]
    return len(tokens) > 1 and tokens[0] in _HONORIFICS


def group_names(names: set[str], pairs: set[tuple[str, str]], manual: ManualDecisions,
                parts: Iterable[tuple[str, str]] = (), person_pairs: Iterable[tuple[str, str]] = ()) -> AliasMap:
    """The alias map (alias -> canonical, canonical names left out) that accepted ``pairs``
    and ``manual`` decisions give over ``names``.

    A name whose accepted partners, or the fuller names it is part of (``parts``, accepted
    or not), cannot all be one thing is ambiguous and stays alone;
    groups never join names of conflicting gender or a never-merge pair. Manual merges go
    first and name their group; the rest follow in sorted order, so the result does not
    depend on the order the pairs were found in.
    """
    return _grouped(names, _Links(names, pairs, manual.never, parts), manual, pairs, person_pairs)


class _Links:
    """The accepted pairs and the parts over ``names`` as grouping reads them: whether two
    names fit, and whether a name is ambiguous (decided when first asked). ``of``: the only
    names whose ambiguity will be asked, when a regrouping asks about few."""

    def __init__(self, names: set[str], pairs: set[tuple[str, str]], never: set[tuple[str, str]],
                 parts: Iterable[tuple[str, str]], of: Optional[set[str]] = None) -> None:
        self.names, self.pairs, self.never = names, pairs, never
        self.partners: dict[str, set[str]] = {}
        for a, b in chain((p for p in pairs if p not in never), parts):
            if a in names and b in names and (of is None or a in of or b in of):
                self.partners.setdefault(a, set()).add(b)
                self.partners.setdefault(b, set()).add(a)
        self._unsure: dict[str, bool] = {}

    def compatible(self, x: str, y: str) -> bool:
        pair = (min(x, y), max(x, y))
        accepted = pair in self.pairs and pair not in self.never and x in self.names and y in self.names
        return accepted or name_relation(x, y) in _COMPATIBLE

    def look_alike(self, x: str, y: str) -> bool:
        """Names that never share a group by rules: a hard :func:`look_alike`, or a qualifier
        no accepted pair (a model's verdict) settled."""
        told = look_alike(x, y)
        return told in _NEVER_ALIKE or bool(told) and (min(x, y), max(x, y)) not in self.pairs

    def unsure(self, name: str) -> bool:
        """Fuller names ``name`` could be part of, that cannot be one thing (``CRATCHIT``:
        ``BOB CRATCHIT``, ``MARTHA CRATCHIT``)."""
        found = self._unsure.get(name)
        if found is None:
            partners = self.partners.get(name, ())
            key = name_key(name)
            found = designation(name)
            if found:  # who is said to be it, but for parts of one of them and its head
                said = [p for p in partners if name_key(p) != found[1]]
                fuller = sorted(p for p in said if not any(set(name_key(p)) < set(name_key(q)) for q in said))
            else:  # a designation's ambiguity is its own, unless this is its head
                fuller = sorted(p for p in partners if len(name_key(p)) >= len(key)
                                and (not designation(p) or designation(p)[1] == key))  # type: ignore[index]
            found = self._unsure[name] = any(not self.compatible(p, q) for i, p in enumerate(fuller)
                                             for q in fuller[i + 1:])
        return found


def _judged(a: str, b: str) -> tuple[str, ...]:
    """The names of an accepted pair whose ambiguity keeps them apart: a name said to be a
    designation is that one thing, however ambiguous a part of it is; a designation's head
    ("THE CLERK") is not."""
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
                # One-word names are parts of the fuller ones (JACOB, MARLEY: JACOB MARLEY);
                # fuller names must fit each other (BOB CRATCHIT is no MARTHA CRATCHIT).
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
        if not any(links.unsure(n) for n in _judged(a, b)):
            union(a, b, forced=False)
    waiting = sorted(p for p in person_pairs if p[0] in names and p[1] in names and p not in never
                     and not links.unsure(p[0]) and not links.unsure(p[1]))
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
            person_pairs: set[tuple[str, str]], *, previous: AliasMap, changed: set[str]) -> AliasMap:
    """What :func:`group_names` gives over these inputs, grouping again only the names a
    write could have moved. ``previous`` must be ``group_names`` of the inputs before the
    write, with the same ``manual`` decisions; ``changed`` every name that joined or left
    ``names`` or gained or lost a pair, a part or a person pair.

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
    links = _Links(names, pairs, manual.never, parts, of=reached)
    aliases.update(_grouped(names & reached, links, manual, within(pairs), within(person_pairs)))
    return aliases
