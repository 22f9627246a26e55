"""LLM-free entity and relation extraction (``extraction="nlp"``).

Builds the same ``ChunkExtraction`` records as the LLM path from surface cues only:
proper-noun spans become entities, sentence co-occurrence becomes relations. ``re`` and
Python for Latin script, jieba's bundled dictionary for sentences in Chinese script
(``chinese_text.py``), so it needs no model download, is deterministic and linear in text size.

Entity type heuristic (first match wins, types upper-case):
  * an honorific in the span ("Mr.", "Mrs.", "Sir", ...)                     -> PERSON
  * head word (last word before "of", else last word) is an organisation word -> ORGANIZATION
  * head word is a place word ("Street", "River", "Hall", ...)                 -> GEO
  * head word is an event word ("War", "Festival", "Christmas", "Day", ...)   -> EVENT
  * a speech verb right next to it ("said Harlow", "Harlow replied")         -> PERSON
  * otherwise                                                                  -> UNKNOWN
Within one chunk an entity takes its most frequent known type over its mentions.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Iterable, NamedTuple, Optional

from graphrag.schema import ChunkExtraction, EntityRecord, RelationRecord, strip_control_chars

from .chinese_text import TERM_TYPE, frequent_terms, sentence_names
from .extraction import normalize_entity_name
from .names import fold_width

logger = logging.getLogger(__name__)

DEFAULT_DESCRIPTION_TOKENS = 60
_CHARS_PER_TOKEN = 4
_MAX_WORD_CHARS = 40  # longer "words" are noise (URLs, hashes, a line without spaces)
_MAX_SPAN_WORDS = 7  # longer capitalised runs are titles / headings, not names
_MAX_ENTITIES_PER_SENTENCE = 20  # bounds pairs per sentence (list-like sentences)
_TOP_CHUNK_ENTITIES = 8  # chunk-level (weak) pairs only among these
_CHUNK_PAIR_WEIGHT = 0.5
_MAX_DESC_SENTENCES = 6  # sentences remembered per entity for its description
# A Chinese chunk with fewer proper nouns than this gets noun terms up to this many entities.
_CHINESE_TERMS = 5

# A line with upper-case letters but no lower-case ones: a heading ("STAVE ONE", "CHAPTER II").
_SHOUT_LINE = re.compile(r"^(?=[^\n]*[A-Z])[^a-z\n]*$", re.M)
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
# Candidate sentence ends: Latin enders + closing quotes/brackets before whitespace, or CJK enders.
_SENT_END = re.compile(r"[.!?]+[\"'”’)\]_]*(?=\s)|[。！？]+[」』”’）]*")
_WORD_BEFORE = re.compile(r"([^\W\d_]+)$")
_NEXT_CHAR = re.compile(r"\s*(\S)")
_HONORIFIC_DOT = r"(?:Mr|Mrs|Ms|Dr|St|Mt|Prof|Rev|Capt|Messrs|Mme|Mlle|Sr|Jr)\."
_LETTER = re.compile(r"[^\W\d_]")
_CJK_NAME = re.compile(r"[「『《]([^」』》。，！？、\s]{1,12})[」』》]")
_WS = re.compile(r"\s+")
# A paragraph's first line, when more lines follow it: a heading if short and in title case.
_FIRST_LINE = re.compile(r"\A[ \t]*([^\n]+?)[ \t]*\n(?=\s*\S)")
# A Markdown (ATX) heading line: "## Title". It ends what precedes it and is a sentence of its
# own, in any language: a title has no sentence end to stop it running into the prose below.
_MARKDOWN_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]+(.*?))?[ \t#]*$", re.M)
_PARENTHESISED = re.compile(r"\([^()\n]*\)")
_LINE_WORD = re.compile(r"[^\W_][^\s]*")
_MAX_HEADING_WORDS = _MAX_SPAN_WORDS
_OPENERS = "\"“‘'([:;_—"

_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st mt prof rev capt messrs mme mlle sr jr gen col lt sgt hon gov vs".split()
)
_PERSON_HONORIFICS = frozenset(
    "mr mrs ms miss dr sir lady lord madam madame dame mme mlle prof professor rev capt captain messrs".split()
)
_CONNECTORS = frozenset("of the de du da del della der van von la le &".split())
# Capitalised only because they open a sentence, before a name: "Old Brandell laughed."
_DESCRIPTIVE_OPENERS = frozenset("old young poor little dear good great kind brave wise".split())
_HEADING_WORDS = frozenset("chapter stave part book section volume preface contents appendix".split())
STOPWORDS = frozenset(
    """a an the and or but nor so yet for if then than that this these those there here
    when where why how what which who whom whose while whilst as at by from in into on onto
    of off to with without within upon over under after before about above below between
    through during until till since because although though unless whether once again
    i me my mine we us our ours you your yours he him his she her hers it its they them their
    theirs myself yourself himself herself itself ourselves themselves one ones
    is are was were be been being am do does did done have has had having shall should will
    would may might must can could let not no yes oh ah ay aye well now still even just only
    also perhaps indeed however nay alas all any some each every both either neither many
    much more most few such other another same very too quite rather never always ever often
    sometimes soon see look come go good dear sure why o two three four five six seven eight
    nine ten eleven twelve twenty hundred thousand first second third last next""".split()
)
_ORG_WORDS = frozenset(
    """company co inc ltd llc corp corporation bank university college school academy church
    society club association institute committee council party ministry department agency
    foundation group press union army navy court parliament congress senate""".split()
)
_GEO_WORDS = frozenset(
    """street road lane avenue square city town village river lake mountain mount island county
    hall house park bridge castle valley sea ocean bay kingdom empire republic province
    state forest hill""".split()
)
_EVENT_WORDS = frozenset(
    "war battle festival christmas day eve revolution conference olympics election feast".split()
)
_SPEECH_VERBS = frozenset(
    "said says asked replied cried exclaimed returned whispered answered shouted muttered observed".split()
)
_CONTRACTIONS = ("'ll", "'d", "'m", "'ve", "'re", "n't", "’ll", "’d", "’m", "’ve", "’re", "n’t")
_ROMAN = re.compile(r"^[IVXLCDM]+$")
# A small roman numeral (I to XXXIX: a regnal, sequel or war number) right after a name word
# is part of the name (OSRIC IV, WORLD WAR II); alone it is none.
_NAME_NUMERAL = re.compile(r"^(?=[IVX])X{0,3}(?:IX|IV|V?I{0,3})$")
_UPPER = "A-Z\u00c0-\u00d6\u00d8-\u00de\u0391-\u03a9\u0410-\u042f"
_LOWER_KEPT = "|".join(sorted((_CONNECTORS | _SPEECH_VERBS) - {"&"}, key=len, reverse=True))
# Only the tokens spans care about (capitalised words, honorifics, connectors, speech verbs,
# "&"); other words are skipped by the regex engine and show up as non-blank gaps.
# A word character other than a Han one: Chinese writes Latin names with no space around
# them ("用LangGraph搭建"), so a Han character ends a Latin word as a space would.
_HAN_CHARS = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_NON_HAN_WORD = rf"[^\W_{_HAN_CHARS}]"
_TOKEN = re.compile(
    rf"\b(?P<hon>{_HONORIFIC_DOT})(?=\s)|(?P<amp>&)(?=\s)"
    rf"|(?<![^\W{_HAN_CHARS}])(?P<w>(?=[{_UPPER}]|(?:{_LOWER_KEPT})\b)[^\W\d_]{_NON_HAN_WORD}*"
    rf"(?:[-'’][^\W\d_]{_NON_HAN_WORD}*)*)"
)


class _Tok(NamedTuple):
    text: str  # surface form, possessive stripped
    lower: str
    initial: bool  # first word of a sentence or clause (after an opening quote, colon, ...)
    joined: bool  # only whitespace separates it from the previous token
    possessive: bool
    honorific: bool


def clean_input(text: str) -> str:
    """Control characters out, line ends unified, full-width letters and digits plain (a
    Latin name typed on a CJK keyboard is read as a name), all-caps heading lines blanked."""
    # A control character becomes a space: a form feed between two words must not join them.
    text = fold_width(strip_control_chars(text.replace("\r\n", "\n").replace("\r", "\n"), " "))
    return _SHOUT_LINE.sub("", text)


def split_sentences(text: str) -> list[str]:
    """Paragraphs, then sentence enders; abbreviations ("Mr.") and initials ("J.") do not split.
    A heading line opening a paragraph is a sentence of its own."""
    return [sentence for sentence, _ in _sentences(text)]


def _heading(line: str) -> bool:
    """A title, not the first line of wrapped prose: short, no sentence end, and every word
    capitalised but function words (a parenthesised part like "(film)" aside)."""
    if line[-1] in ".!?,-" or ":" in line or ";" in line:
        return False
    words = _LINE_WORD.findall(_PARENTHESISED.sub(" ", line))
    if not words or len(words) > _MAX_HEADING_WORDS:
        return False
    return any(w[0].isupper() for w in words) and all(
        not w[0].islower() or w.lower() in STOPWORDS or w.lower() in _CONNECTORS for w in words)


def _sentences(text: str) -> list[tuple[str, bool]]:
    """``(sentence, is_heading)`` pairs, in order; a Markdown heading line is a sentence of
    its own (its ``#`` marks dropped) wherever it stands in a paragraph."""
    sentences: list[tuple[str, bool]] = []
    for para in _PARAGRAPH.split(text):
        start = 0
        for m in _MARKDOWN_HEADING.finditer(para):
            sentences.extend(_prose_sentences(para[start:m.start()].lstrip()))
            if m.group(1):  # in sentence case ("Segment tree") its first word opens a sentence
                sentences.append((m.group(1), _heading(m.group(1))))
            start = m.end()
        sentences.extend(_prose_sentences(para[start:].lstrip()))
    return sentences


def _prose_sentences(para: str) -> list[tuple[str, bool]]:
    """The sentences of a paragraph without Markdown headings (its first line may be a title)."""
    sentences: list[tuple[str, bool]] = []
    if para:
        first = _FIRST_LINE.match(para)
        if first and _heading(first.group(1)):
            sentences.append((first.group(1), True))
            para = para[first.end():]
    start = 0
    for m in _SENT_END.finditer(para):
        nxt = _NEXT_CHAR.match(para, m.end())
        if nxt and nxt.group(1).islower() and m.group()[0] in ".!?":
            continue  # '"Bah!" said Harlow' and 'e.g. this' stay one sentence
        if m.group() == ".":
            before = _WORD_BEFORE.search(para, max(0, m.start() - 12), m.start())
            word = before.group(1) if before else ""
            if word.lower() in _ABBREVIATIONS or (len(word) == 1 and word != "I"):
                continue
        piece = para[start : m.end()].strip()
        if piece:
            sentences.append((piece, False))
        start = m.end()
    piece = para[start:].strip()
    if piece:
        sentences.append((piece, False))
    return sentences


def _tokenize(sentence: str) -> list[_Tok]:
    toks: list[_Tok] = []
    prev_end = 0
    for m in _TOKEN.finditer(sentence):
        gap = sentence[prev_end : m.start()]
        stripped = gap.strip()
        if toks:
            initial = stripped != "" and stripped[-1] in _OPENERS
        else:  # first kept token: initial unless a skipped word precedes it
            initial = _LETTER.search(gap) is None or (stripped != "" and stripped[-1] in _OPENERS)
        hon = m.group("hon")
        if hon or m.group("amp"):
            text, possessive = hon or "&", False
        else:
            text = m.group("w")
            possessive = text.endswith(("'s", "’s"))
            if possessive:
                text = text[:-2]
            elif text.endswith("s") and sentence[m.end() : m.end() + 1] in ("'", "’"):
                nxt = sentence[m.end() + 1 : m.end() + 2]
                possessive = not (nxt.isalnum() or nxt == "_")
        low = text.lower()
        toks.append(
            _Tok(text, low, initial, stripped == "", possessive, bool(hon) or low in _PERSON_HONORIFICS)
        )
        prev_end = m.end()
    return toks


def _is_name_word(tok: _Tok) -> bool:
    """Capitalised, plausible length, not a lone letter, roman numeral or heading word."""
    t = tok.text
    if not t or not t[0].isupper() or len(t) > _MAX_WORD_CHARS or len(t) < 2:
        return False
    if tok.lower in _HEADING_WORDS or tok.lower.endswith(_CONTRACTIONS):
        return False
    if t.isupper() and (_ROMAN.match(t) or tok.lower in STOPWORDS):
        return False
    return True


def _numbers_name(toks: list[_Tok], k: int) -> bool:
    """Whether token ``k`` is a small roman numeral written right after a name word
    (the I of ELIZABETH I; not the pronoun after "and")."""
    return (k > 0 and toks[k].joined and _NAME_NUMERAL.match(toks[k].text) is not None
            and _is_name_word(toks[k - 1]))


def _spans(toks: list[_Tok], mid_caps: set[str]) -> Iterable[tuple[int, int]]:
    """Yield [start, end) token ranges of proper-noun spans, edges trimmed."""
    run: list[int] = []

    def flush() -> Iterable[tuple[int, int]]:
        i, j = (run[0], run[-1] + 1) if run else (0, 0)
        while i < j and (toks[i].lower in STOPWORDS or toks[i].lower in _CONNECTORS):
            i += 1
        while j > i and (toks[j - 1].lower in STOPWORDS and not _numbers_name(toks, j - 1)
                         or toks[j - 1].lower in _CONNECTORS or toks[j - 1].honorific):
            j -= 1
        if j > i and not (j - i == 1 and toks[i].honorific) and j - i <= _MAX_SPAN_WORDS:
            yield i, j
        run.clear()

    for k, tok in enumerate(toks):
        if run and not tok.joined:
            yield from flush()
        if _is_name_word(tok):
            nxt = toks[k + 1] if k + 1 < len(toks) else None
            # A first name opening a sentence ("Ada Pennick designed") starts a span when a
            # name word follows it; a lone capitalised opener ("When", "Bah") does not.
            opens_name = (nxt is not None and (_is_name_word(nxt) and nxt.joined or _numbers_name(toks, k + 1))
                          and not tok.possessive
                          and tok.lower not in STOPWORDS and tok.lower not in _DESCRIPTIVE_OPENERS)
            if tok.initial and not tok.honorific and tok.text not in mid_caps and not opens_name:
                yield from flush()
                continue  # only ever seen at sentence starts: "When", "Bah", ...
            run.append(k)
            if tok.possessive:
                yield from flush()
        elif run and tok.lower in _CONNECTORS and not tok.possessive:
            run.append(k)
        elif run and _numbers_name(toks, k) and run[-1] == k - 1:
            run.append(k)
            if tok.possessive:  # OSRIC IV'S
                yield from flush()
        else:
            yield from flush()
    yield from flush()


def _entity_type(toks: list[_Tok], i: int, j: int, prev: Optional[_Tok], nxt: Optional[_Tok]) -> str:
    if any(t.honorific and t.lower.rstrip(".") in _PERSON_HONORIFICS for t in toks[i:j]):
        return "PERSON"
    words = [t.lower for t in toks[i:j]]
    head = words[-1]
    for k, w in enumerate(words):
        if w in ("of", "de") and k > 0:
            head = words[k - 1]
            break
    if head in _ORG_WORDS:
        return "ORGANIZATION"
    if head in _GEO_WORDS or words[0] in ("mount", "lake", "river"):
        return "GEO"
    if head in _EVENT_WORDS:
        return "EVENT"
    if (prev is not None and prev.lower in _SPEECH_VERBS) or (nxt is not None and nxt.lower in _SPEECH_VERBS):
        return "PERSON"
    return "UNKNOWN"


def _cut(text: str, max_chars: int) -> str:
    """Whitespace-collapsed text, cut at a word boundary to max_chars."""
    text = _WS.sub(" ", text[: max_chars * 3]).strip()
    if len(text) <= max_chars:
        return text
    head = text[: max_chars - 3]
    space = head.rfind(" ")
    if space > max_chars // 2:
        head = head[:space]
    return head.rstrip() + "..."


_TYPE_PRIORITY = ("PERSON", "ORGANIZATION", "GEO", "EVENT", TERM_TYPE)


def extract_chunk_nlp(content: str, *, max_description_tokens: Optional[int] = None,
                      user_dictionary: Optional[str] = None) -> ChunkExtraction:
    """Entities from proper-noun spans, relations from same-sentence co-occurrence.
    Sentences in Chinese script also get jieba's typed proper nouns, and, where the chunk
    has few of them, its most repeated noun terms (``chinese_text.py``);
    ``user_dictionary``: a jieba user dictionary whose words are always entities."""
    max_chars = max(16, (max_description_tokens or DEFAULT_DESCRIPTION_TOKENS) * _CHARS_PER_TOKEN)
    split = _sentences(clean_input(content or ""))
    sentences = [sentence for sentence, _ in split]
    han = [sentence_names(s, user_dictionary) for s in sentences]
    proper_han = {name for names in han for name, _ in names.proper}
    terms = (frequent_terms(han, _CHINESE_TERMS - len(proper_han))
             if len(proper_han) < _CHINESE_TERMS else set())
    # A heading's words are names even where they open the line ("Wangliang" as a title).
    tokenized = [[t._replace(initial=False) for t in _tokenize(s)] if heading else _tokenize(s)
                 for s, heading in split]
    mid_caps = {t.text for toks in tokenized for t in toks if not t.initial and t.text[:1].isupper()}

    mentions: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    desc_sents: dict[str, list[int]] = {}
    type_votes: dict[str, Counter[str]] = {}
    pair_count: Counter[tuple[str, str]] = Counter()
    pair_first: dict[tuple[str, str], int] = {}

    for si, (sentence, toks) in enumerate(zip(sentences, tokenized)):
        found: list[tuple[str, str]] = [
            (normalize_entity_name(" ".join(t.text for t in toks[i:j])),
             _entity_type(toks, i, j, toks[i - 1] if i > 0 and toks[i].joined else None,
                          toks[j] if j < len(toks) and toks[j].joined else None))
            for i, j in _spans(toks, mid_caps)
        ]
        found.extend((normalize_entity_name(m.group(1)), "UNKNOWN") for m in _CJK_NAME.finditer(sentence))
        found.extend(han[si].proper)
        found.extend((term, TERM_TYPE) for term in han[si].terms if term in terms)
        in_sentence: list[str] = []
        for name, etype in found:
            if not name:
                continue
            mentions[name] += 1
            first_seen.setdefault(name, len(first_seen))
            type_votes.setdefault(name, Counter())[etype] += 1
            sents = desc_sents.setdefault(name, [])
            if (not sents or sents[-1] != si) and len(sents) < _MAX_DESC_SENTENCES:
                sents.append(si)
            if name not in in_sentence and len(in_sentence) < _MAX_ENTITIES_PER_SENTENCE:
                in_sentence.append(name)
        in_sentence.sort()
        for a in range(len(in_sentence)):
            for b in range(a + 1, len(in_sentence)):
                key = (in_sentence[a], in_sentence[b])
                pair_count[key] += 1
                pair_first.setdefault(key, si)

    cut_cache: dict[int, str] = {}

    def sent(si: int) -> str:
        if si not in cut_cache:
            cut_cache[si] = _cut(sentences[si], max_chars)
        return cut_cache[si]

    entities: list[EntityRecord] = []
    for name in sorted(mentions):
        parts: list[str] = []
        length = 0
        for si in desc_sents[name]:
            s = sent(si)
            if s in parts:
                continue
            if parts and length + 1 + len(s) > max_chars:
                break
            parts.append(s)
            length += len(s) + (1 if length else 0)
        votes = type_votes[name]
        known = [t for t in _TYPE_PRIORITY if votes.get(t)]
        etype = max(known, key=lambda t: (votes[t], -_TYPE_PRIORITY.index(t))) if known else "UNKNOWN"
        entities.append({"name": name, "type": etype, "description": " ".join(parts)})

    relations: list[RelationRecord] = [
        {"source": a, "target": b, "description": sent(pair_first[(a, b)]), "weight": float(n)}
        for (a, b), n in pair_count.items()
    ]
    # Weak chunk-level links among the few most mentioned entities, bounded to 28 pairs.
    top = sorted((n for n, c in mentions.items() if c >= 2), key=lambda n: (-mentions[n], first_seen[n]))
    top = sorted(top[:_TOP_CHUNK_ENTITIES])
    for a in range(len(top)):
        for b in range(a + 1, len(top)):
            key = (top[a], top[b])
            if key not in pair_count:
                relations.append({
                    "source": key[0], "target": key[1], "weight": _CHUNK_PAIR_WEIGHT,
                    "description": f"{key[0]} and {key[1]} are mentioned in the same passage.",
                })
    relations.sort(key=lambda r: (r["source"], r["target"]))
    return {"entities": entities, "relations": relations}


def extract_chunks_nlp(
    chunks: dict[str, dict], *, max_description_tokens: Optional[int] = None,
    user_dictionary: Optional[str] = None,
) -> dict[str, ChunkExtraction]:
    """Run ``extract_chunk_nlp`` over ``{chunk_id: {"content": ...}}``, keeping input order."""
    out = {
        cid: extract_chunk_nlp(str(chunk.get("content", "")), max_description_tokens=max_description_tokens,
                               user_dictionary=user_dictionary)
        for cid, chunk in chunks.items()
    }
    logger.debug("nlp extraction: %d chunks", len(out))
    return out
