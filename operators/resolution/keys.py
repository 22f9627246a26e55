"""Name keys and what two names alone say: one thing possibly (a relation) or
two things surely (a look-alike)."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

from graphrag.operators.extraction import normalize_entity_name as _normalize
from graphrag.operators.names import fold_name


# Profiles read the same names chunk after chunk: each is normalised once. This and the
# other lru_caches of this package memoise pure functions of one name (no store, no
# setting, no instance state), bounded in size: any instance asking gets the same answer.
normal_name = lru_cache(maxsize=1 << 17)(_normalize)

from .words import ARTICLES as _ARTICLES
from .words import CATEGORY_WORDS as _CATEGORY_WORDS
from .words import CONNECTORS as _CONNECTORS
from .words import CORPORATE as _CORPORATE
from .words import DESCRIPTIVE as _DESCRIPTIVE
from .words import GENERATIONS as _GENERATIONS
from .words import GENERIC_HEADS as _GENERIC_HEADS
from .words import HONORIFICS as _HONORIFICS
from .words import MODIFIERS as _MODIFIERS
from .words import NICKNAME_WORDS as _NICKNAME_WORDS
from .words import NUMBER_VALUES as _NUMBER_VALUES

TOKEN = re.compile(r"[^\W_]+(?:['-][^\W_]+)*", re.UNICODE)
_HYPHEN_BETWEEN_WORDS = re.compile(r"(?<=[^\W\d_]{2})-(?=[^\W\d_]{2})")
_DASH = re.compile(r"--+|[—–]")


# --------------------------------------------------------------------------- names


def name_key(name: str) -> tuple[str, ...]:
    """The tokens that identify ``name``: upper case, punctuation and hyphens gone, a
    trailing possessive dropped (``HALE'S`` -> ``HALE``), leading articles,
    honorifics and descriptive words dropped, corporate suffixes dropped. A possessive
    inside the name stays (``HALE'S NEPHEW`` is someone else)."""
    return key_of(name, True)


def surface_variants(a: str, b: str) -> bool:
    """Two names that differ only in spelling: case, punctuation, a possessive, an article
    (``TOM BRANT'S`` / ``TOM BRANT``), not a title or a descriptive word."""
    return key_of(a, False) == key_of(b, False)


@lru_cache(maxsize=1 << 17)
def key_of(name: str, drop_titles: bool) -> tuple[str, ...]:
    """:func:`name_key`, or with ``drop_titles`` False the tokens of ``name`` with its
    honorifics and descriptive words kept (:func:`surface_variants` compares those)."""
    # A hyphen between words splits them ("SUMMER-TIME"); one around a particle does not
    # ("JASHN-E-REKHTA" is one word, not "REKHTA").
    text = fold_name(normal_name(name))
    # A dash breaks the sentence: a span across it ("EVE--OLD HALE") names what follows.
    text = next((part for part in reversed(_DASH.split(text)) if part.strip()), text)
    tokens = TOKEN.findall(_HYPHEN_BETWEEN_WORDS.sub(" ", text))
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
    # A repeated word ("HALE HALE") names nothing new; what hyphens left joined is one word.
    key: list[str] = []
    for token in tokens:
        token = token.replace("-", "")
        if token and (not key or key[-1] != token):
            key.append(token)
    if len(key) > 1 and all(len(t) == 1 for t in key):  # U.S., C.S.A.: one word
        key = ["".join(key)]
    # A span caught twice: "GLASS HOUND GLASS HOUND", "EXIES THE EXIES".
    for span in (key, [t for t in key if t not in _ARTICLES]):
        for size in range(1, len(span) // 2 + 1):
            if len(span) % size == 0 and span == span[:size] * (len(span) // size):
                return tuple(span[:size])
    return tuple(key)


def acronym_of(key: tuple[str, ...]) -> Optional[str]:
    """``NRA`` for ``NORTHLAND RAIL AUTHORITY`` (connector words skipped)."""
    letters = [t[0] for t in key if t not in _CONNECTORS]
    return "".join(letters) if len(letters) >= 2 else None


def acronyms_of(key: tuple[str, ...]) -> tuple[str, ...]:
    """The acronyms a name of several words may have: its initials without its connector
    words (``PRC``) and with them (``BOT`` for BOARD OF TRADE)."""
    forms = [acronym_of(key), "".join(t[0] for t in key) if len(key) >= 2 else None]
    return tuple(dict.fromkeys(f for f in forms if f))


def abbreviated(word: str) -> Optional[str]:
    """The abbreviation of a one-word name in a script without case or spaces, two
    characters a word: the first character of each (北京大学 -> 北大)."""
    if len(word) >= 4 and len(word) % 2 == 0 and all(c.isalpha() and c.upper() == c.lower() for c in word):
        return word[::2]
    return None


@lru_cache(maxsize=1 << 17)
def _accented_initials(name: str) -> tuple[str, ...]:
    """The accent-kept first letter of each word of ``name``'s key, connectors included
    (ÉCOLE DU LAC SUPÉRIEUR: É D L S), so an acronym is compared as written."""
    words = [w for w in re.split(r"[\s-]+", fold_name(normal_name(name), keep_accents=True)) if w]
    written = {}
    for word in words:
        letters = "".join(c for c in word if c.isalnum())
        if letters:
            written.setdefault(fold_name(letters), letters)
    return tuple(written.get(t, t)[0] for t in name_key(name))


def _spells(acronym_name: str, letters: str, long_name: str) -> bool:
    """Whether the one-word ``acronym_name`` (its folded key ``letters``) spells the initials
    of ``long_name`` with the accents both write: ŽR is not ZONAL RAILWAYS' ZR,
    ÉLS is ÉCOLE DU LAC SUPÉRIEUR's, ELS is not."""
    written = accented_key(acronym_name, letters)
    initials = _accented_initials(long_name)
    key = name_key(long_name)
    # Both ways: an accented letter is another letter (ÖVP is not OVP, whose initials are
    # OSTMARK VOLKS PARTEI ...), so a plain acronym does not spell accented initials either.
    return written in ("".join(i for i, t in zip(initials, key) if t not in _CONNECTORS), "".join(initials))


@lru_cache(maxsize=1 << 17)
def gender(name: str) -> Optional[str]:
    """"M" or "F" when an honorific says so (``MRS. BRANT``), else None."""
    for token in TOKEN.findall(normal_name(name)):
        if token in _ARTICLES or token in _DESCRIPTIVE:
            continue
        return _HONORIFICS.get(token)
    return None


def _initial_match(a: str, b: str) -> bool:
    return a == b or (len(a) == 1 and b.startswith(a)) or (len(b) == 1 and a.startswith(b))


@lru_cache(maxsize=1 << 17)
def relational(tokens: tuple[str, ...]) -> bool:
    """A name built from other names: a connector, an inner article ("HALE THE
    BALEFUL") or an inner possessive."""
    return any(t in _CONNECTORS or t.endswith("'S") for t in tokens) or "THE" in tokens[1:]


@lru_cache(maxsize=1 << 17)
def name_grams(name: str) -> tuple[str, ...]:
    """The character 3-grams of a name's key, each once (a tuple of strings: cached per name,
    it leaves the collector nothing to track, where a frozenset would stay tracked)."""
    text = f" {' '.join(name_key(name))} "
    return tuple(sorted({text[i:i + 3] for i in range(max(1, len(text) - 2))}))


# Names sharing no word are ``fuzzy`` (a similar spelling) from this Jaccard similarity of their
# 3-grams on.
FUZZY_SIMILARITY = 0.5


def gram_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two names' 3-grams."""
    ga, gb = name_grams(a), name_grams(b)
    shared = len(set(ga).intersection(gb))
    return shared / (len(ga) + len(gb) - shared) if ga and gb else 0.0


# A spelling variant is told by the names alone only in names of at least this many letters
# (short names a letter apart are too often other names: JOHN / JOAN), and within one edit per
# this many letters, at most two (transliterations: KARIM / KAREEM, TOMAS / TOMMAS).
_SPELLING_LETTERS, _LETTERS_PER_EDIT, SPELLING_EDITS = 12, 7, 2


def _letters(key: tuple[str, ...]) -> str:
    """A key's letters run together: spacing and word breaks are spelling too
    (RAMADEVAN / RAMA DEVAN)."""
    return "".join(c for t in key for c in t if c.isalnum())


@lru_cache(maxsize=1 << 17)
def spelt(key: tuple[str, ...]) -> Optional[str]:
    """The letters of a key that may have spelling variants (:func:`spelling_variant`): long
    enough, no initial, no digit; None for other keys."""
    letters = _letters(key)
    if len(letters) < _SPELLING_LETTERS or any(len(t) == 1 for t in key) or any(c.isdigit() for c in letters):
        return None
    return letters


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` once it exceeds ``limit``
    (a band of the table: only the cells within ``limit`` of the diagonal are computed)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    start = 0  # the common ends cost nothing: only what lies between them is compared
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    end = 0
    while end < len(a) - start and end < len(b) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    a, b = a[start:len(a) - end], b[start:len(b) - end]
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [limit + 1] * len(b)
        for j in range(max(1, i - limit), min(len(b), i + limit) + 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != b[j - 1]))
        if min(current) > limit:
            return limit + 1
        previous = current
    return min(previous[len(b)], limit + 1)


def _inflected(first_a: str, first_b: str) -> bool:
    """Two first words that differ only in their last two letters: a given name's form for
    the other sex (LOUIS / LOUISE, ALEXANDER / ALEXANDRA, JULIUS / JULIA), another person."""
    if first_a == first_b:
        return False
    common = 0
    while common < min(len(first_a), len(first_b)) and first_a[common] == first_b[common]:
        common += 1
    return common >= max(len(first_a), len(first_b)) - 2


@lru_cache(maxsize=1 << 17)  # asked of a pair by blocking from both names
def spelling_variant(ka: tuple[str, ...], kb: tuple[str, ...]) -> bool:
    """Two long names whose letters differ by an edit or two (a letter changed, added or
    dropped, a word split or joined): one name spelt two ways, in any script. Not where
    either writes initials or digits (a middle initial or a number is another name, told by
    ``look_alike``), nor where only the ending of the first word changes (:func:`_inflected`)."""
    la, lb = spelt(ka), spelt(kb)
    if la is None or lb is None or abs(len(la) - len(lb)) > SPELLING_EDITS or _inflected(ka[0], kb[0]):
        return False
    limit = min(SPELLING_EDITS, min(len(la), len(lb)) // _LETTERS_PER_EDIT)
    return _edits(la, lb, limit) <= limit


# --------------------------------------------------------------------------- look-alikes

# A roman numeral (I to XXXIX): a number in a name (ORION XIII, OSRIC IV).
_ROMAN = re.compile(r"^(X{0,3})(IX|IV|V?I{0,3})$")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}
# An ordinal written with digits ("2ND", "21ST").
_DIGIT_ORDINAL = re.compile(r"^(\d+)(?:ST|ND|RD|TH|E|ER|ÈME|º|ª)?$")
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
    lone letter only as the last word: J. MORROW's J is an initial), a number word."""
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


def _worded(key: tuple[str, ...]) -> bool:
    """Whether a key holds a word that is no number (:func:`_numbers`)."""
    return any(not _numbers((t,)) for t in key)


def name_words(key: tuple[str, ...]) -> int:
    """How many words of a name are more than an initial."""
    return sum(len(t) > 1 for t in key)


def _middle_initials_differ(ka: tuple[str, ...], kb: tuple[str, ...]) -> bool:
    """Two names with one first and last word, each writing its middle names as initials,
    different ones (GEORGE H. W. BUSH / GEORGE W. BUSH): who writes initials writes them all."""
    if len(ka) < 3 or len(kb) < 3 or ka[0] != kb[0] or ka[-1] != kb[-1]:
        return False
    middle_a, middle_b = ka[1:-1], kb[1:-1]
    return all(len(t) == 1 for t in middle_a + middle_b) and middle_a != middle_b


def _leading_initials(key: tuple[str, ...]) -> int:
    count = 0
    while count < len(key) - 1 and len(key[count]) == 1:
        count += 1
    return count


def accented_key(name: str, key: str) -> str:
    """The one-word ``key`` of ``name`` with its accents, as the name writes it (ČSA is not
    C.S.A., whose keys are both CSA)."""
    letters = "".join(c for c in fold_name(normal_name(name), keep_accents=True) if c.isalnum())
    return letters[-len(key):] if fold_name(letters).endswith(key) else key


@lru_cache(maxsize=1 << 17)
def _marks(name: str) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...], int]:
    """What :func:`look_alike` compares of one name: its key, numbers, generation suffixes
    (sorted) and how many initials lead it. Tuples of strings and numbers only: the
    collector stops tracking those, where a frozenset per cached name stays tracked and
    brings on full collections."""
    key = name_key(name)
    return key, _numbers(key), tuple(sorted(set(key) & _GENERATIONS)), _leading_initials(key)


# Look-alike reasons no evidence overrides; a qualifier (``look_alike``) a model may.
NEVER_ALIKE = frozenset({"number", "generation", "initials", "accents"})


@lru_cache(maxsize=1 << 17)  # asked of one pair by blocking, the decision and the grouping
def look_alike(a: str, b: str) -> Optional[str]:
    """Why two names that look alike name different things, from the names alone (None: no
    such reason). Rules never merge such a pair and never put it in one group:

    - ``number``: the numbers differ in names sharing a word, or one of only numbers (ORION 4 /
      ORION 6, 2ND / 3RD ARMY);
    - ``generation``: a generation suffix differs (JOHN SMITH JR. / JOHN SMITH);
    - ``initials``: initials stand where the other has a full first name (T.J. SMITH /
      TOM SMITH: J is not in TOM), or both write middle initials, different ones;
    - ``accents``: a short name that differs in its accents only (ČSA / C.S.A.);
    - ``qualifier``: one name is the other with words added around a connector (BANK OF
      SCOTLAND / ROYAL BANK OF SCOTLAND, ANN LEE / ANN LEE OF THE BAND),
      unless the shorter is a common noun with an article (THE HARBOUR / HARBOUR OF KELMOUTH);
      only a model's verdict merges such a pair.
    """
    if a == b:
        return None
    (ka, numbers_a, generation_a, run_a), (kb, numbers_b, generation_b, run_b) = _marks(a), _marks(b)
    # Names that share no word do not look alike, whatever their numbers: a number tells two
    # things apart only in names alike but for it (a nickname stated of OSRIC VANE III is not
    # its look-alike; OSRIC VANE is).
    if numbers_a != numbers_b and (set(ka) & set(kb) or not _worded(ka) or not _worded(kb)):
        return "number"
    if generation_a != generation_b:
        return "generation"
    for x, y, run in ((ka, kb, run_a), (kb, ka, run_b)):
        # A surname alone has no first name to disagree with (MARSH / E. K. MARSH).
        if run >= 2 and len(y) > 1 and len(y[0]) > 1 and not all(_initial_match(i, w) for i, w in zip(x[:run], y[:run])):
            return "initials"
    if _middle_initials_differ(ka, kb):
        return "initials"
    if ka == kb and len(ka) == 1 and len(ka[0]) <= 5 and accented_key(a, ka[0]) != accented_key(b, kb[0]):
        return "accents"
    if _compound_split(a, ka, kb) or _compound_split(b, kb, ka):
        return "qualifier"
    if ka != kb and (relational(ka) or relational(kb)):
        short, long = sorted((ka, kb), key=len)
        added_at_an_end = long[:len(short)] == short or long[len(long) - len(short):] == short
        common_noun = len(short) == 1 and normal_name(a if ka == short else b).split()[0] in _ARTICLES
        # A designation of its head by an owner (HALE'S OFFICE / OFFICE) is a relation of its
        # own; not when that head is itself a name built around a connector: a possessive
        # added to it makes another thing (PEOPLE'S REPUBLIC OF X / REPUBLIC OF X).
        found = designation(b if ka == short else a)
        designated = found is not None and not relational(found[1])
        if added_at_an_end and not common_noun and not designated:
            return "qualifier"
    return None


@lru_cache(maxsize=1 << 17)
def _compounds(name: str) -> tuple[tuple[str, ...], ...]:
    """The words of ``name`` written joined by hyphens (MID-WESTERN: (MID, WESTERN)), as key
    tokens; the key splits them."""
    text = fold_name(normal_name(name))
    return tuple(tuple(part) for word in TOKEN.findall(text) if _HYPHEN_BETWEEN_WORDS.search(word)
                 for part in [[p for p in _HYPHEN_BETWEEN_WORDS.split(word) if p]] if len(part) > 1)


def _compound_split(long_name: str, long: tuple[str, ...], short: tuple[str, ...]) -> bool:
    """Whether the shorter key keeps a later part of one of ``long_name``'s hyphenated words
    without its first part: the first part qualifies the rest (MID-WESTERN is not WESTERN,
    JEAN-LUC is not LUC), so the shorter name is another thing."""
    if len(short) >= len(long):
        return False
    return any(parts[0] not in short and any(p in short for p in parts[1:]) for parts in _compounds(long_name))


def name_relation(a: str, b: str) -> Optional[str]:
    """How two names could denote one thing, from the names alone (None: they cannot):

    - ``same_key``: equal keys (``THE BRANT FAMILY`` / ``BRANT FAMILY``);
    - ``initials``: equal but for initials (``J. MORROW`` / ``JAMES MORROW``);
    - ``middle_name``: one adds middle names or initials (``JOHN T. DOE`` / ``JOHN DOE``);
    - ``acronym``: one is the other's initials (``NRA`` / ``NORTHLAND RAIL AUTHORITY``);
    - ``abbreviation``: one keeps the first character of each two of the other, in a script
      without case or spaces (北大 / 北京大学);
    - ``spelling``: long names whose letters differ by an edit or two (``KARIM AL FARSANI`` /
      ``KAREEM AL FARSANI``);
    - ``surname``, ``first_name``: a one-word name that ends or starts a person-like name;
    - ``overlap``: other shared words; ``fuzzy``: similar spelling only.

    Symmetric: blocking asks it of a pair from both names, and grouping asks it again, so
    each pair is worked out once, in one order.
    """
    return _name_relation(a, b) if a <= b else _name_relation(b, a)


@lru_cache(maxsize=1 << 17)
def _name_relation(a: str, b: str) -> Optional[str]:
    if a == b:
        return "same_key"
    told = look_alike(a, b)
    if told in NEVER_ALIKE:
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
    if spelling_variant(ka, kb):
        return "spelling"
    short, long = (ka, kb) if (len(ka), ka) <= (len(kb), kb) else (kb, ka)
    if len(short) == 1 and len(long) >= 2 and short[0] in acronyms_of(long):
        # Folded letters meet; the accents each name writes must agree too (ČT / CT).
        acronym_name, long_name = (a, b) if ka == short else (b, a)
        return "acronym" if _spells(acronym_name, short[0], long_name) else None
    if len(short) == len(long) == 1 and abbreviated(max(short[0], long[0], key=len)) == min(short[0], long[0], key=len):
        return "abbreviation"
    if len(short) == len(long) and all(_initial_match(x, y) for x, y in zip(short, long)):
        return "initials"
    owned_a, owned_b = owned(a), owned(b)
    if owned_a and owned_a == owned_b and (designation(a) is None) != (designation(b) is None):
        return "possessive"  # MORROW'S GHOST / GHOST OF JAMES MORROW
    if owned_a and kb == owned_a[1] or owned_b and ka == owned_b[1]:
        return "head"  # THE STEWARD / HALE'S STEWARD
    if relational(long) and not relational(short):
        return "overlap" if set(short) & set(long) else None
    if len(short) >= 2 and _initial_match(short[0], long[0]) and _initial_match(short[-1], long[-1]) \
            and all(len(t) == 1 or t in short for t in long[1:-1]) and set(short) <= set(long) | set(short[:1]):
        return "middle_name"
    if len(short) == 2 and len(long) in (3, 4) and short[0] == long[0] and short[-1] == long[-1] \
            and not set(long) & (_GENERIC_HEADS | _CONNECTORS | _MODIFIERS):
        return "extended_name"  # INGRID SOLVEIG HALVORSEN / INGRID HALVORSEN
    for nick, full in ((ka, kb), (kb, ka)):
        if len(nick) == 2 and nick[0] in _NICKNAME_WORDS and 2 <= len(full) <= 3 and full[0] == nick[1]:
            return "first_name"  # LITTLE NED / NED BRANT
    if long[:-1] == short and long[-1] in _CATEGORY_WORDS:
        return "category"  # BRISK-MORROW PRODUCTIONS / BRISK-MORROW
    if set(short) <= set(long):
        extra = set(long) - set(short)
        if long[-1] in _GENERIC_HEADS or short[-1] in _GENERIC_HEADS or extra & _MODIFIERS:
            return "overlap"
        if len(short) == 1 and name_words(long) <= 3:  # initials are no words (J. R. K. MARSH)
            if short[0] == long[-1]:
                return "surname"
            if short[0] == long[0]:
                return "first_name"
        if len(short) > 1 and long[-len(short):] == short:
            return "surname"
        return "overlap"
    if set(short) & set(long):
        return "overlap"
    return "fuzzy" if gram_similarity(a, b) >= FUZZY_SIMILARITY else None


# Relations only a model or a person can settle: a shared word, a similar spelling, or
# (``similar``, from embedding blocking) nothing in the names but what they describe.
UNSETTLED_RELATIONS = frozenset({"overlap", "fuzzy", "similar"})
# What loose blocking gives a pair it meets where strict blocking does not (a shared word, an
# initial): its relation, unsettled or none, since strict blocking meets every pair of another
# relation. It is worked out (:func:`name_relation`) only for a pair whose profiles could make
# it worth asking (``evidence.cannot_be_asked``): most pairs met there cannot.
UNWORKED = "unworked"


@lru_cache(maxsize=1 << 17)
def designation(name: str) -> Optional[tuple[str, tuple[str, ...]]]:
    """The owner and head of a name that designates something by another name's
    (``HALE'S PARTNER``: HALE, (PARTNER,)); None for other names."""
    key = name_key(name)
    inner = [i for i, t in enumerate(key[:-1]) if t.endswith("'S")]
    if not inner or len(key) - inner[-1] - 1 > 3:
        return None
    return key[inner[-1]][:-2], key[inner[-1] + 1:]


@lru_cache(maxsize=1 << 17)
def owned(name: str) -> Optional[tuple[str, tuple[str, ...]]]:
    """The owner's last word and the head of a designation in either form: HALE'S
    PARTNER, GHOST OF JAMES MORROW (MORROW, (GHOST,)); None for other names."""
    found = designation(name)
    key = name_key(name)
    if found is None and "OF" in key[1:4]:
        at = key.index("OF")
        owner = [t for t in key[at + 1:] if t not in _ARTICLES]
        if owner:
            found = owner[-1][:-2] if owner[-1].endswith("'S") else owner[-1], key[:at]
    return found
