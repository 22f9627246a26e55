"""Chinese text for the LLM-free paths: segmentation, proper nouns and noun terms, search tokens.

Chinese has no capital letters and no spaces, so the English extractor's cues do not apply.
``jieba`` (MIT, bundles its dictionary, works offline) segments a sentence into words and tags
each with a part of speech; its proper-noun tags give typed entities, and runs of nouns give
the terms technical prose names things by. Script detection (a Han character or not) decides
where this runs, so a mixed Chinese/English text gets both extractors.

``jieba`` is imported on first use: a text with no Han character never loads it.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import threading
from array import array
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Optional

from .names import fold_width
from .tokenizer import replace_file

if TYPE_CHECKING:
    import jieba
    import jieba.posseg

logger = logging.getLogger(__name__)

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# jieba's proper-noun tags and the entity type each stands for.
PROPER_NOUN_TYPES = {"nr": "PERSON", "ns": "GEO", "nt": "ORGANIZATION", "nz": "UNKNOWN"}
TERM_TYPE = "CONCEPT"
# Tags of the words a noun term is made of (common, proper-other, verbal and other nouns).
_NOUN_TAGS = frozenset({"n", "nz", "vn", "nrt", "ng", "nw"})
_MAX_PERSON_CHARS = 4  # a Chinese personal name is two to four characters; longer "nr" is a mis-tag
_MIN_NAME_CHARS = 2  # one character is a word, never a name or a term here
_MAX_TERM_CHARS = 10  # longer noun runs are phrases, not terms
_LATIN_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")

_lock = threading.Lock()
_tokenizers: dict[Optional[str], tuple[Any, frozenset[str]]] = {}
_taggers: dict[Optional[str], Any] = {}


def has_han(text: str) -> bool:
    """Whether the text holds Chinese script (one Han character is enough)."""
    return _HAN.search(text) is not None


_LATIN_END = 0x250  # Basic Latin to Latin Extended-B


def mostly_latin(text: str) -> bool:
    """Whether the text is mostly in Latin script (English and the like, which the bundled
    English embedding model reads), counted in words: a run of letters of a spaced script is
    one word, and so is each Han character (a Chinese word is one to a few of them): more
    Latin words than others. "LangGraph 的 checkpoint 怎么存储" is Chinese."""
    latin = other = 0
    run = ""  # the script of the letter run being read: "latin", "other" or ""
    for ch in text:
        if ch.isdigit():
            continue  # "Neo4j" is one word
        script = ("" if not ch.isalpha() else "han" if _HAN.match(ch)
                  else "latin" if ord(ch) < _LATIN_END else "other")
        if script == "han":
            other += 1
        elif script and script != run:
            latin, other = (latin + 1, other) if script == "latin" else (latin, other + 1)
        run = script if script != "han" else ""
    return latin > other


_DICTIONARY_MAGIC = b"graphrag-jieba-dictionary 1\n"


def _dictionary_cache_path() -> str:
    import jieba

    # Beside jieba's own cache, named by its version (the bundled dictionary comes with it).
    return os.path.join(tempfile.gettempdir(), f"graphrag-jieba-{jieba.__version__}.dictionary")


def _write_dictionary_cache(path: str, freq: dict[str, int], total: int) -> None:
    """jieba's prefix dictionary, after a hash of the rest: its total, the counts (little-endian
    int64) then the words, one a line (a dictionary word holds no newline: jieba reads its
    dictionary by lines)."""
    from xxhash import xxh64_intdigest

    counts = array("q", freq.values())
    if sys.byteorder != "little":
        counts.byteswap()
    body = b"".join([total.to_bytes(8, "little"), len(freq).to_bytes(8, "little"), counts.tobytes(),
                     "\n".join(freq).encode("utf-8")])
    try:
        replace_file(path, _DICTIONARY_MAGIC + xxh64_intdigest(body).to_bytes(8, "little") + body)
    except OSError as exc:
        logger.debug("Not caching jieba's dictionary at %s: %s", path, exc)


def _read_dictionary_cache(path: str) -> Optional[tuple[dict[str, int], int]]:
    from xxhash import xxh64_intdigest

    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data.startswith(_DICTIONARY_MAGIC):
            return None
        at = len(_DICTIONARY_MAGIC) + 8
        if xxh64_intdigest(data[at:]) != int.from_bytes(data[at - 8:at], "little"):
            return None  # a damaged cache is not trusted
        total = int.from_bytes(data[at:at + 8], "little")
        count = int.from_bytes(data[at + 8:at + 16], "little")
        at += 16
        counts = array("q")
        counts.frombytes(data[at:at + 8 * count])
        if sys.byteorder != "little":
            counts.byteswap()
        words = data[at + 8 * count:].decode("utf-8").split("\n")
        if len(words) != count or len(counts) != count:
            return None
        return dict(zip(words, counts)), total
    except (OSError, ValueError):
        return None


def _load_default_dictionary(tokenizer: jieba.Tokenizer) -> None:
    """Loads jieba's bundled dictionary into ``tokenizer`` from a compact cache after the first
    load. jieba's own cache is a marshal dump that takes most of a second to read, in every
    process that meets a Chinese text; the counts and words read back whole are the same prefix
    dictionary, so the words cut are the same. A missing or unreadable cache is rebuilt from
    jieba's own load."""
    if tokenizer.initialized or tokenizer.dictionary is not None:
        return
    path = _dictionary_cache_path()
    cached = _read_dictionary_cache(path)
    if cached is None:
        tokenizer.initialize()
        _write_dictionary_cache(path, tokenizer.FREQ, tokenizer.total)
        return
    with tokenizer.lock:
        if not tokenizer.initialized:
            tokenizer.FREQ, tokenizer.total = cached
            tokenizer.initialized = True


def _read_user_words(path: str) -> frozenset[str]:
    """The words of a jieba user dictionary (``word [frequency] [tag]`` per line)."""
    with open(path, encoding="utf-8") as f:
        return frozenset(line.split()[0] for line in f if line.strip() and not line.lstrip().startswith("#"))


def _word_tokenizer(user_dictionary: Optional[str]) -> tuple[Any, frozenset[str]]:
    """jieba's word segmenter with the user dictionary loaded (one per dictionary, built once:
    each has its own word list, so two indexes with different dictionaries do not mix), and
    the dictionary's words. Search tokens need no part-of-speech tags: the tagger's tables
    (tens of MB) load only where tags are read (:func:`_tagger`)."""
    with _lock:
        if user_dictionary not in _tokenizers:
            import jieba

            jieba.setLogLevel(logging.WARNING)  # its own logger prints the dictionary's loading
            words: frozenset[str] = frozenset()
            tokenizer = jieba.dt if user_dictionary is None else jieba.Tokenizer()
            _load_default_dictionary(tokenizer)
            if user_dictionary is not None:
                tokenizer.load_userdict(user_dictionary)
                words = _read_user_words(user_dictionary)
            _tokenizers[user_dictionary] = (tokenizer, words)
        return _tokenizers[user_dictionary]


def _tagger(user_dictionary: Optional[str]) -> jieba.posseg.POSTokenizer:
    """A part-of-speech segmenter over :func:`_word_tokenizer`'s segmenter of the dictionary."""
    tokenizer, _ = _word_tokenizer(user_dictionary)
    with _lock:
        if user_dictionary not in _taggers:
            import jieba.posseg

            _taggers[user_dictionary] = (jieba.posseg.dt if user_dictionary is None
                                         else jieba.posseg.POSTokenizer(tokenizer))
        return _taggers[user_dictionary]


def tagged_words(text: str, user_dictionary: Optional[str] = None) -> list[tuple[str, str]]:
    """``(word, part-of-speech tag)`` pairs of the text, in order."""
    return [(pair.word, pair.flag) for pair in _tagger(user_dictionary).cut(text)]


class SentenceNames:
    """What one sentence names: proper nouns with their types, and noun terms."""

    def __init__(self, words: list[tuple[str, str]], user_words: frozenset[str]) -> None:
        self.proper: list[tuple[str, str]] = []
        self.terms: list[str] = []
        run: list[str] = []

        def end_run() -> None:
            term = "".join(run)
            # A term is a run of two nouns or more ("用户画像" from 用户 + 画像), or one long noun.
            if (len(run) > 1 or len(term) > 2) and _has_only_han(term) and len(term) <= _MAX_TERM_CHARS:
                self.terms.append(term)
            run.clear()

        for word, tag in words:
            if word in user_words:
                end_run()
                self.proper.append((word, PROPER_NOUN_TYPES.get(tag, TERM_TYPE)))
            elif tag in PROPER_NOUN_TYPES and _plausible_name(word, tag):
                end_run()
                self.proper.append((word, PROPER_NOUN_TYPES[tag]))
            elif tag in _NOUN_TAGS and has_han(word) and len(word) >= _MIN_NAME_CHARS:
                run.append(word)
            else:
                end_run()
        end_run()


def _has_only_han(text: str) -> bool:
    return all(_HAN.match(ch) for ch in text)


def _plausible_name(word: str, tag: str) -> bool:
    if len(word) < _MIN_NAME_CHARS or not _has_only_han(word):
        return False
    return tag != "nr" or len(word) <= _MAX_PERSON_CHARS


def sentence_names(sentence: str, user_dictionary: Optional[str] = None) -> SentenceNames:
    """Proper nouns and noun terms of one sentence (empty when it holds no Han character)."""
    if not has_han(sentence):
        return SentenceNames([], frozenset())
    _, user_words = _word_tokenizer(user_dictionary)
    return SentenceNames(tagged_words(sentence, user_dictionary), user_words)


def frequent_terms(per_sentence: Iterable[SentenceNames], limit: int) -> set[str]:
    """The ``limit`` noun terms a text repeats most (first seen first among equals): what a
    text with few proper nouns, as technical prose is, is about."""
    counts: Counter[str] = Counter()
    for names in per_sentence:
        counts.update(names.terms)
    return {term for term, _ in counts.most_common(limit)}


def split_words(words: list[str], user_dictionary: Optional[str] = None) -> list[str]:
    """``words`` with each one in Chinese script cut into jieba's words (Chinese writes no
    spaces, so a whole clause arrives as one "word"); full-width letters and digits in it are
    read plain, so a Latin name typed full-width is cut out as one word."""
    out: list[str] = []
    for word in words:
        if has_han(word):
            tokenizer, _ = _word_tokenizer(user_dictionary)
            out.extend(w for w in tokenizer.cut(fold_width(word)) if w.strip())
        else:
            out.append(word)
    return out


def join_words(words: list[str]) -> str:
    """Words back into text: a space between two words only where neither is Chinese."""
    text = ""
    for word in words:
        text += word if not text or has_han(word[:1]) or has_han(text[-1:]) else " " + word
    return text


def search_tokens(text: str, user_dictionary: Optional[str] = None) -> list[str]:
    """Words to match a query against a passage: jieba's words where the text is Chinese,
    lower-cased letter-and-digit words elsewhere (punctuation and spaces dropped); full-width
    letters and digits match plain ones."""
    text = fold_width(text)
    if not has_han(text):
        return [w.lower() for w in _LATIN_WORD.findall(text)]
    tokenizer, _ = _word_tokenizer(user_dictionary)
    tokens = []
    for word in tokenizer.cut(text):
        if has_han(word):
            tokens.append(word)
        else:
            tokens.extend(w.lower() for w in _LATIN_WORD.findall(word))
    return tokens
