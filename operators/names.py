"""The one place names are normalised for matching: how two spellings of a name are made to
meet, whatever script or keyboard wrote them.

``fold_name`` applies Unicode NFKC (full-width ``ＡＢＣ`` and ligatures become ``ABC``, the
compatibility forms their plain letters), upper case, one apostrophe, and drops accents
unless asked to keep them: keys meet across accents (IMMERGLÜCK, IMMERGLUCK), while an
acronym is compared with them (ČSA is not C.S.A.). Entity resolution's keys, the graph
API's name lookup and the walk's loose names all build on it.
"""
from __future__ import annotations

import re
import unicodedata

# A word of a name: letters and digits, with inner apostrophes and hyphens (O'NEIL, JEAN-LUC).
_NAME_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
_LETTERS = re.compile(r"[^\W_]+")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})
# Full-width Latin letters and digits (ＡＢＣ, １２３), as CJK input methods type them: the
# plain letters shifted by a fixed offset.
_FULL_WIDTH_ALNUM = {c: c - 0xFEE0 for c in (*range(0xFF10, 0xFF1A), *range(0xFF21, 0xFF3B),
                                              *range(0xFF41, 0xFF5B))}


def fold_width(text: str) -> str:
    """Full-width letters and digits as plain ones, everything else as written: running text
    keeps its full-width punctuation (。！？ end Chinese sentences), while a Latin name typed
    full-width reads as the same name typed plain."""
    return text.translate(_FULL_WIDTH_ALNUM)


def name_form(text: str) -> str:
    """A name as stored: NFKC-normalised (full-width and compatibility forms as their plain
    characters), so one name typed two ways is one entity."""
    return unicodedata.normalize("NFKC", text)


def fold_name(text: str, *, keep_accents: bool = False) -> str:
    """``text`` upper-cased after NFKC, apostrophes unified, accents dropped unless
    ``keep_accents`` (then composed, NFC)."""
    folded = name_form(text).translate(_APOSTROPHES).upper()
    if folded.isascii():
        return folded
    if keep_accents:
        return unicodedata.normalize("NFC", folded)
    return "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))


def name_words(text: str, *, keep_accents: bool = False) -> list[str]:
    """The words of a name, folded (:func:`fold_name`); hyphens and apostrophes inside a word stay."""
    return _NAME_WORD.findall(fold_name(text, keep_accents=keep_accents))


def compact_key(text: str) -> str:
    """Letters and digits only, folded: what two spellings of one name share as a user
    types it (``dr who``, ``Dr. Who``, ``ＤＲ．ＷＨＯ``)."""
    return "".join(_LETTERS.findall(fold_name(text)))


def loose_key(text: str) -> str:
    """The words of a name without punctuation, a leading THE or a trailing possessive 'S,
    space-separated: a looser key for matching a name inside running text."""
    words = _LETTERS.findall(re.sub(r"'S\b", "", fold_name(text)))
    if words and words[0] == "THE":
        words = words[1:]
    return " ".join(words)
