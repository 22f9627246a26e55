"""English rules: what an English description says about the name it describes.

Each rule reads a general pattern of English prose, never a word of one text: a pronoun's
gender, a noun after "is a" (what the name is), words written in lower case (a description
rather than a name), a plural verb (a group's name), and stated identities (a designation,
"known as X", an acronym in brackets). They apply to a description only when it is English
(:func:`is_english`: Latin script and enough English function words), so a corpus in another
language gets the language-independent core alone, never rules misreading its text (German
writes every noun capitalised; a Chinese text has no case at all).
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Optional

from .keys import acronym_of, name_key

# English function words (the general class: articles, pronouns, auxiliaries, prepositions,
# conjunctions): the signature :func:`is_english` counts, and words a description's bag of
# words leaves out.
FUNCTION_WORDS = frozenset(
    """the a an and or but of to in on at by for with from into as is are was were be been being
    has have had he his him himself she her hers herself they them their it its this that these
    those who whom whose which what when where not also there than then said says one all any
    over out about after before more most other some such only very upon would could should will
    shall can may might""".split()
)
# Words a description's bag of words leaves out besides: what extractors write of any name.
STOPWORDS = FUNCTION_WORDS | frozenset("mentioned text related".split())
# Share of a text's lower-case words that must be function words for it to read as English
# (English prose runs at about 40-50%, other languages written in Latin script near 0).
_ENGLISH_SHARE = 0.15
_LOWER_WORD = re.compile(r"\b[a-z]+\b")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_ASCII_LETTER = re.compile(r"[A-Za-z]")

_PRONOUNS = {**dict.fromkeys("he his him himself".split(), "M"), **dict.fromkeys("she her hers herself".split(), "F")}
# A pronoun in either case ("his", "His"), by gender.
_PRONOUN_FORMS = {**_PRONOUNS, **{p.capitalize(): g for p, g in _PRONOUNS.items()}}
# A pronoun written as a word of its own: never right after or before a word character or an
# apostrophe ("he'd", "O'his", "her1" are none). The lookahead on the first letter lets the
# scan skip the positions no pronoun starts at before it tests what stands around them.
_PRONOUN = re.compile(r"(?=[HhSs])(?<![\w'])(?:%s)(?![\w'])" % "|".join(
    sorted(_PRONOUN_FORMS, key=len, reverse=True)))
# A word written in lower case: what a word of a name must be to be found so in a text.
_LOWER_CASE_WORD = re.compile(r"[a-z][a-z']*")
# What a description says someone is ("Old Fenwick is a jovial old gentleman"): the noun of
# the phrase after "is a" / "was the", before any preposition, relative word or punctuation.
_GENDERED_NOUNS = {
    **dict.fromkeys("""man gentleman boy lad father son brother husband uncle nephew master king prince
        lord actor widower""".split(), "M"),
    **dict.fromkeys("""woman lady girl lass mother daughter sister wife aunt niece mistress queen princess
        matron actress widow""".split(), "F")}
_PREDICATE = re.compile(r"\b(?:is|was)\s+(?:a|an|the)\s+((?:(?!\b(?:of|who|whom|whose|that|which|with|to|in|at|"
                        r"for|from|by|on|and)\b)[a-z' -])+)")

# --------------------------------------------------------------------------- stated identities

# What a description states its name is. A designation: "James Morrow was Hale's partner",
# "Mrs. Brant is the wife of Tom Brant" (an owner, a proper word, and a common noun);
# another name: "Tom Brant, also called Thomas", "Hale's nephew, called Frank".
_COPULA = r"\b(?:is|was)\s+(?:(?:also|now|once|still|only|in fact)\s+)?"
_POSSESSIVE_START = r"(?:[A-Z][\w.'-]*\s+){0,3}?([A-Z][\w-]*)['’]s\s"
_OF_START = r"(?:the|a|an)\s+((?:[a-z][a-z-]*\s+){0,3}?)(?:of|to)\s+(?:the\s+)?"
_POSSESSED = re.compile(_COPULA + _POSSESSIVE_START + r"+((?:[a-z][a-z-]*\s*){1,4})")
_OF_OWNER = re.compile(_COPULA + _OF_START + r"(?:[A-Z][\w.'-]*\s+){0,3}?([A-Z][\w-]*)(?![\w'-]*\s+[A-Z])")
# Either, in one scan of a text: most texts have neither.
_DESIGNATED = re.compile(_COPULA + f"(?:{_POSSESSIVE_START}|{_OF_START}[A-Z])")
_NAMING_WORDS = ("known as", "called", "named", "dubbed", "aka", "a.k.a", "pen name", "stage name", "birth name",
                 "abbreviation", "acronym", "short form", "short for", "stands for", "name of", "name for",
                 "title of", "title for", "born ", "née ")
# Words between a name and a statement about it ("X is the abbreviation of", "X wrote under
# the pen name").
_STATEMENT_LINKS = frozenset("is was the a an also often commonly wrote writes under as its his her their "
                             "has had been".split())
# The first group names a history or a statement about the name itself ("renamed", "the
# abbreviation of", "the pen name of", "the full name of", "a nickname of", "the English title
# of", "stands for"): said only where the sentence opens with the name it describes. A name
# said of another is one of its names (full, former, another ...); a title only with a word
# making it a work's other title ("the English title of"), not a rank ("the title of", "an
# ancestral title of": a title many hold); a last or given name is a part of the name, not it.
_OTHER_NAME = (r"(?:(?:pen|stage|birth|full|real|original|former|official|native|alternative|alternate|other"
               r"|another)\s+name|nickname|code\s?name"
               r"|(?:[Ee]nglish|original|alternative|alternate|working|international)\s+(?:release\s+)?title)")
_NAMED_AS = re.compile(r"\b(?:(renamed(?:\s+as|\s+to)?|changed\s+its\s+name\s+to"
                       r"|(?:abbreviation|acronym|short\s+form|" + _OTHER_NAME + r")\s+(?:of|for)"
                       r"|(?:pen|stage)\s+name|short\s+for|stands\s+for)|known\s+as|called|named|nicknamed"
                       r"|dubbed|a\.k\.a\.?|aka)\s+(?:the\s+)?[\"'“‘]?([A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*){0,4})")
# A birth name in an aside after the name it was changed to: "Ada Lind (born Ada Maria Holm; ...)",
# "Ada Lind (1901-1980), born Ada Holm, was ...", "Ada Lind (née Ada Holm)"; or the full name
# before the birth in the aside: "Ada Holm (Ada Maria Vigdis Holm; born 1901)". Two capitalised
# words or more (a particle between them), ending the aside's phrase: a date ("born May 3"), a
# place ("born in Leeds") or a surname alone ("née Holm", a family's name) names no person.
_PERSON_NAME = r"([A-Z][\w.'’-]*(?:\s+(?:(?:von|van|de|der|du|da|del|di|le|la)\s+)?[A-Z][\w.'’-]*)+)"
_BIRTH_NAME = re.compile(r"(?:\(\s*|[,;]\s*)(?:born|née|nee)\s+" + _PERSON_NAME
                         + r"(?=\s*(?:[),;(]|$)|\s+(?:on|in|at|to)\s)|\(\s*" + _PERSON_NAME + r"\s*;\s*born\b")
# Lower-case particles inside a person's name, then the rest of it ("Anna von Ebner", "Luis de
# Torres"): the name goes on past them.
_PARTICLE_NAME = re.compile(r"(?:\s+(?:von|van|de|der|den|du|da|del|della|di|le|la|bin|ibn|al)"
                            r"(?:\s+[A-Z][\w.'’-]*)+)+")
_NUMBER_GOES_ON = re.compile(r"\s+\d")
# What stands before a naming word that names, not a verb ("Hale called Tom in"): a comma
# or a parenthesis, or an adverb ("also called").
_NAMING_LEAD = re.compile(r"(?:[,(]\s*|\s(?:also|better|commonly|otherwise|often|sometimes|popularly|"
                          r"affectionately|simply)\s+|\s(formerly|previously|originally|later|now)\s+)$")
# One more name of a list after a naming word: ", Chubby", "or the Northland Rowing Federation".
_LISTED_NAME = re.compile(r"[\"'”’]?\s*(?:,\s*(?:or\s+|and\s+)?|\s+(?:or|and)\s+)(?:the\s+)?[\"'“‘]?"
                          r"([A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*){0,4})")
# An acronym in brackets ("(WWF)").
_BRACKETED = re.compile(r"\(\s*([A-Z][A-Z.&-]+)\s*\)")
# A designation's head stops at a word that starts another phrase ("and" does not: "Hale's
# old friend and partner").
_HEAD_STOP = frozenset("""who whom whose which that or but with in at of for to from on by as is was
    during since when where while after before until""".split())
# Lower-case words inside a name ("School for Boys", "Mallik Rehan Dargah in Sira").
_JOINING = frozenset("of and with from for to the de du da del von van in on at &".split())
_NAME_GOES_ON = re.compile(r"\s+(?:of|from|with|for|the|de|du|da|del|von|van|in|on|at)\s+[A-Z]")
# A sentence ends at a stop, not after an initial or a title ("E. K. Marsh", "Mr. Brant").
_SENTENCE = re.compile(r"(?<=[.!?;])(?<!\b[A-Z]\.)(?<!\bMr\.)(?<!\bMrs\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)"
                       r"(?<!\bJr\.)(?<!\bSr\.)\s+")
_SUBJECT_PRONOUNS = frozenset("he she it they this".split())
# A word of running text, hyphens splitting it as they split a name's key ("counting-house").
_PLAIN_WORD = re.compile(r"[^\W_]+")
# Words right before "is a" that make someone else the subject ("Tom said he was a ...").
_OTHER_SUBJECTS = _SUBJECT_PRONOUNS | frozenset("who which that there i we you".split())


def _inside_a_name(words: list[str], start: int) -> bool:
    """Whether the words from ``start`` end a longer name ("Summer with The Brady Bunch",
    "Labour Council of South Australia")."""
    previous = words[start - 1] if start > 0 else ""
    if previous[:1].isupper():
        return True
    return previous in _JOINING and start > 1 and words[start - 2][:1].isupper()


def claim_cues(text: str) -> Optional[tuple[bool, bool, bool]]:
    """Which kinds of statement ``text`` may hold (a designation, a naming word, an acronym in
    brackets), read from the text alone; None where it holds none or is not English (most
    texts): there is nothing for :func:`description_claims` to read. A text several names
    share (one sentence describing each name in it) is read once for all of them."""
    designated = _DESIGNATED.search(text) is not None
    naming = any(word in text for word in _NAMING_WORDS)
    bracketed = _BRACKETED.search(text) is not None
    if not designated and not naming and not bracketed or not is_english(text):
        return None
    return designated, naming, bracketed


def description_claims(name: str, text: str) -> set[str]:
    """What ``text``, a description of ``name``, states the name is, as claim keys:
    ``D OWNER WORD`` for each word of a designation it is given (its subject must be the
    name or a pronoun), ``K TOKENS`` for another name it is called, was renamed, abbreviates
    or is the pen, stage or birth name of. Nothing
    from a text that is not English."""
    cues = claim_cues(text)
    return cued_claims(name, text, cues) if cues is not None else set()


def cued_claims(name: str, text: str, cues: tuple[bool, bool, bool]) -> set[str]:
    """:func:`description_claims` of a text whose :func:`claim_cues` are ``cues``."""
    designated, naming, bracketed = cues
    claims: set[str] = set()
    own = name_key(name)
    for sentence in _SENTENCE.split(text):
        if designated:
            claims |= _designation_claims(sentence, own)
        if naming:
            claims |= _naming_claims(sentence, own)
        if bracketed:
            claims |= _bracket_claims(sentence, own)
    if naming:  # an aside runs over the semicolons a sentence is split at
        claims |= _birth_name_claims(text, own)
    return claims


def _designation_claims(sentence: str, own: tuple[str, ...]) -> set[str]:
    """"James Morrow was Hale's partner": D HALE PARTNER."""
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
    """"Tom, also called Thomas", "Ned Brant, known as Little Ned" (said in Little Ned's
    description), "The Lindqvist method ... has been renamed the Harbour method", "NRF is the
    abbreviation of Northland Rowing Federation"."""
    claims: set[str] = set()
    for match in _NAMED_AS.finditer(sentence):
        if match.group(1) and not match.group(1).startswith(("renamed", "changed")):
            # A statement about the name itself: its subject must be the name, right before it.
            subject = sentence[:match.start()].split()
            while subject and subject[-1].lower() in _STATEMENT_LINKS:
                subject.pop()
            named, end = match.group(2), match.end()
            if particle := _PARTICLE_NAME.match(sentence, end):  # "the full name of Anna von Ebner"
                named, end = named + particle.group(), particle.end()
            other = name_key(named)
            # An owner is no name of it ("the English title of Marten's novel"), nor is the start
            # of a name a number goes on ("the code name of the Tern 2 relay").
            if subject and name_key(" ".join(subject)) == own and other and other != own \
                    and not named.endswith(("'s", "’s")) and not _NAME_GOES_ON.match(sentence, end) \
                    and not _NUMBER_GOES_ON.match(sentence, end):
                claims.add("K " + " ".join(other))
            continue
        lead = _NAMING_LEAD.search(sentence[max(0, match.start() - 20):match.start()])
        history = match.group(1) is not None or lead is not None and lead.group(1) is not None
        if lead is None and not history:
            continue  # a verb: "Hale called Tom in"
        before = _without_dates(sentence[:match.start() - (len(lead.group()) if lead else 0)])
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


def _birth_name_claims(text: str, own: tuple[str, ...]) -> set[str]:
    """"Ada Lind (1901-1980), born Ada Maria Holm": the name's birth name, in an aside right
    after it (its dated asides between them), an encyclopedia's way of giving a stage, pen or
    married name's bearer the name she was born with; and "Ada Holm (Ada Maria Vigdis Holm;
    born 1901)", the full name it shortens."""
    claims: set[str] = set()
    for match in _BIRTH_NAME.finditer(text):
        words = [w.strip(",(") for w in _without_dates(text[:match.start()]).split()[-10:]]
        said_of = _name_at_end(words, own)
        other = name_key(match.group(1) or match.group(2))
        # The full name before the birth is the name with more words, its first one kept
        # (another name there is which, unclear: a role, a place).
        full = match.group(1) is not None or other[:1] == own[:1] and len(other) > len(own)
        if said_of is not None and not _inside_a_name(words, said_of) and other and other != own and full:
            claims.add("K " + " ".join(other))
    return claims


def _without_dates(before: str) -> str:
    """``before`` without the bracketed asides holding a number that end it: an encyclopedia
    writes a life's or a work's dates there ("Ada Holm (1901 – 1980), known as ..."), and the
    name before them is the one the naming word speaks of. An aside without a number may be
    another name ("Ada Holm (Tove Lind), known as ...": which name is which is unclear)."""
    while True:
        trimmed = before.rstrip(" ,")
        if not trimmed.endswith(")"):
            return before
        opening = trimmed.rfind("(")
        if opening < 0 or not any(c.isdigit() for c in trimmed[opening:]):
            return before
        before = trimmed[:opening]


def _bracket_claims(sentence: str, own: tuple[str, ...]) -> set[str]:
    """"The Northland Rowing Federation (NRF)": the name's acronym in brackets right after it
    (other names in brackets are too often a place, a year or a role: "Kelmport
    Harbour (Tasmania)", "Ada Holm (Tove Lind)")."""
    acronym = acronym_of(own)
    claims: set[str] = set()
    for match in _BRACKETED.finditer(sentence) if acronym else ():
        words = sentence[:match.start()].split()[-8:]
        said_of = _name_at_end(words, own)
        if said_of is not None and name_key(match.group(1)) == (acronym,):
            claims.add(f"K {acronym}")
    return claims


def _name_at_end(words: list[str], own: tuple[str, ...]) -> Optional[int]:
    """Where the name starts if ``words`` end with it ("Hale's nephew" in "... of Hale's nephew")."""
    return next((i for i in range(len(words)) if name_key(" ".join(words[i:])) == own), None)


def _opens_with(sentence: str, own: tuple[str, ...]) -> bool:
    """Whether the sentence starts with the name (the subject of what it says)."""
    words = sentence.split()[:len(own) + 3]
    return any(name_key(" ".join(words[:i])) == own for i in range(1, len(words) + 1))


@lru_cache(maxsize=1 << 14)
def is_english(text: str) -> bool:
    """Whether ``text`` reads as English: its words are written in Latin letters and enough
    of them are English function words. Decided by the text alone, so what a description
    says never depends on other texts."""
    if not text.isascii() and len(_NON_ASCII.findall(text)) > 0.2 * len(_ASCII_LETTER.findall(text)):
        return False
    # Among the words in lower case: a description is full of names, the rest is prose.
    prose = _LOWER_WORD.findall(text)
    return sum(map(FUNCTION_WORDS.__contains__, prose)) >= max(1.0, _ENGLISH_SHARE * len(prose))


def description_pronouns(texts: list[str]) -> Counter:
    """The pronouns of the English ``texts`` by gender (``M``/``F``), with the nouns after
    "is a" that have one."""
    pronouns: Counter = Counter()
    for text in texts:
        male, female = _text_pronouns(text)
        if male:
            pronouns["M"] += male
        if female:
            pronouns["F"] += female
    return pronouns


@lru_cache(maxsize=1 << 15)  # one sentence describes each name in it (the offline extractor)
def _text_pronouns(text: str) -> tuple[int, int]:
    """:func:`description_pronouns` of one text, as (male, female) counts."""
    counts = {"M": 0, "F": 0}
    for form in _PRONOUN.findall(text):
        counts[_PRONOUN_FORMS[form]] += 1
    said = _PREDICATE.search(text.lower())
    gendered = next((g for w in said.group(1).split() if (g := _GENDERED_NOUNS.get(w))), None) if said else None
    if gendered:
        counts[gendered] += 1
    return counts["M"], counts["F"]


def written_in_lower_case(word: str, texts: list[str]) -> bool:
    """Whether one of ``texts`` writes ``word`` (in lower case) as a lower-case word of its own:
    letters and apostrophes, with no word character or apostrophe either side. Searched for
    the word itself: a name asks of its few words, where listing every word of every text
    costs more than the reading."""
    if not _LOWER_CASE_WORD.fullmatch(word):
        return False
    for text in texts:
        at = text.find(word)
        while at >= 0:
            before, after = text[at - 1:at], text[at + len(word):at + len(word) + 1]
            if not (before.isalnum() or before in ("_", "'")) and not (after.isalnum() or after in ("_", "'")):
                return True
            at = text.find(word, at + 1)
    return False


def description_roles(name: str, texts: list[str]) -> set[str]:
    """What the English ``texts`` say ``name`` is: the nouns after "is a", "was the" with the
    name as subject."""
    roles: set[str] = set()
    own = set(name_key(name))
    for text in texts:
        said = _PREDICATE.search(text.lower())
        if said and said.group(1).split() and _subject_is(own, text, said.start()):
            roles.add(said.group(1).split()[-1])
    return roles


def said_to_be(name: str, texts: list[str], word: str) -> bool:
    """Whether one of the English ``texts`` says ``name`` is a ``word`` (upper case, a key word):
    the word, as written, in the noun phrase after "is a", "was the" with the name as subject
    ("Kelm Springs is the resort near Harbury" says KELM SPRINGS is a RESORT). Only the word
    itself: a plural (FILMS, RECORDS) names a maker of such things, its singular one of them."""
    own, lowered = set(name_key(name)), word.lower()
    for text in texts:
        said = _PREDICATE.search(text.lower())
        if said and lowered in said.group(1).split() and _subject_is(own, text, said.start()):
            return True
    return False


def _subject_is(own: set[str], text: str, at: int) -> bool:
    """Whether the clause before ``at`` names the name of key words ``own`` ("Old Jack is
    ..."; not "he was ...")."""
    start = max(text.rfind(c, 0, at) for c in ".;!?") + 1
    words = _PLAIN_WORD.findall(text[start:at])
    if words and words[-1].lower() in _OTHER_SUBJECTS:
        return False
    return bool({w.upper() for w in words} & own)


# A word before a plural verb (one pattern for every name: compiling one per name costs more
# than reading the texts).
_BEFORE_PLURAL_VERB = re.compile(r"(?<!\w)(\S+)\s+(?:are|were|have)\b")


def plural_name(name: str, texts: list[str]) -> bool:
    """A group's name, as the English ``texts``' verbs say ("The young Brants are ...")."""
    last = name.split()[-1] if name.split() else ""
    if not last.endswith("S") or last.endswith(("'S", "SS")):
        return False
    last = last.lower()
    return any(word.endswith(last) and (len(word) == len(last) or not word[-len(last) - 1].isalnum()
                                        and word[-len(last) - 1] != "_")
               for text in texts for word in _BEFORE_PLURAL_VERB.findall(text.lower()))


def opening_pronouns(texts: list[str]) -> Counter:
    """The pronouns that open the English ``texts``, by gender: a relation's text written about
    its source opens with its subject, so "She runs the workshop" says the source is a
    woman, where the text names no one ("he" inside a text may be anyone it mentions)."""
    pronouns: Counter = Counter()
    for text in texts:
        opening = _PRONOUN.match(text.lstrip())
        if opening and is_english(text):
            pronouns[_PRONOUN_FORMS[opening.group(0)]] += 1
    return pronouns


def gender_from_pronouns(pronouns: Counter) -> Optional[str]:
    """"M" or "F" when pronoun counts clearly say so ("... with his wife")."""
    male, female = pronouns["M"], pronouns["F"]
    if male >= 2 and male >= 3 * female:
        return "M"
    if female >= 2 and female >= 3 * male:
        return "F"
    return None


# A birth stated in a bracketed aside: "(born 1929, ...)", "(b. 12 May 1953 in ...)", "(born
# on March 3, 1950)": only a day and a month may stand between the word and the year, so a
# later year of the aside ("born in Leeds, moved in 1960") is never read as the birth.
_BORN_ASIDE = re.compile(r"\(\s*(?:born|b\.)\s+(?:on\s+)?(?:\d{1,2}\s+)?(?:[A-Z][a-z]+\.?\s+)?(?:\d{1,2},?\s+)?"
                         r"(\d{4})(?!\d)")


def born_asides(text: str) -> list[tuple[int, str]]:
    """Where ``text`` opens a bracketed aside stating a birth year, and the year (four digits)."""
    return [(m.start(), m.group(1)) for m in _BORN_ASIDE.finditer(text)] if "b" in text else []
