"""Chinese rules: what a Chinese description states about the name it describes.

Chinese writes no spaces and has no case, so the English rules (:mod:`.english`) never read a
Chinese text, and the core compares its names only as wholes. What such a description can
still say plainly is another name of the thing, in the language's own grammar of naming:

- a copula sentence opening with the described name: "X是Y的名称" (X is Y's name), with a
  modifier of the name noun from a closed class ("最初名称", its first name; "旧称", a former
  one) and an optional time or place phrase after Y ("X是Y在1801年至1820年间的名称");
- a naming word right after the subject or at the start of a clause about it: "X，字Y" (courtesy
  name), "号Y" (art name), "又名Y", "又称Y", "简称Y", "原名Y", "改名Y" (renamed Y), a year before
  it allowed ("1801年改名Y").

The named span runs to the next punctuation (or "的"), and must be that whole span: a span
with more after the name ("Y称帝后", "Y的产品名称") states nothing, so an owner of the named
thing (a company whose product is named) is never taken for it. The words are data of the
language (its nouns and verbs of naming), never the words of one text.
"""
from __future__ import annotations

import re
from functools import lru_cache

from .keys import name_key

# Han characters (the CJK unified ideographs and their first extension).
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
# What ends a named span: punctuation (full-width and ASCII), brackets, quotes, spaces, "的".
_END = r"，。、；：！？（）()《》「」『』“”\"'\s,.;:!?的"
_SPAN = rf"([^{_END}]+)"
# Nouns of naming that may follow "的" in "X是Y的…名称": name, title of address, short form,
# other name, former name, original name, full name, real name.
_NAME_NOUNS = r"(?:名称|名字|称号|简称|别称|别名|旧称|原名|全称|本名|称谓)"
# Modifiers a name noun takes there (first, original, official, former, old, new, other,
# common, English, Chinese): a closed class. Another noun before it (产品名称, a product's name)
# names something of Y's, not Y.
_NAME_MODIFIERS = r"(?:最初|原来|原先|正式|官方|曾用|旧|新|另一个|另一|通用|常用|英文|中文|外文)?"
# A time or place phrase after the named span: "在1801年至1820年间", "于明代".
_WHEN = rf"(?:(?:在|于|从)[^{_END}]*)?"
_IS_NAME_OF = re.compile(rf"^是([^{_END}]+?){_WHEN}的{_NAME_MODIFIERS}{_NAME_NOUNS}(?:[{_END}]|$)")
# Naming words at the start of a clause about the subject: courtesy name, art name, also named,
# also called, short form, original name, former name, renamed (as).
_NAMING = re.compile(rf"(?:^|[，,（(])\s*(?:\d+年)?(?:字|号|又名|又称|亦称|简称|原名|旧称|别名|改名为?|更名为?)"
                     rf"{_SPAN}(?=[{_END}]|$)")


def has_han(text: str) -> bool:
    """Whether ``text`` writes a Han character: a text without one states no name here
    (:func:`is_chinese` needs one), so a reader can skip it before asking per name."""
    return _HAN.search(text) is not None


def is_chinese(text: str) -> bool:
    """Whether ``text`` is mostly Han characters (of its letters): read by the text alone."""
    han = len(_HAN.findall(text))
    return han > 0 and han >= 0.5 * sum(c.isalpha() for c in text)


@lru_cache(maxsize=1 << 15)  # a description is read for each name it describes
def stated_names(name: str, text: str) -> frozenset[str]:
    """The claim keys (``K TOKENS``, as :func:`.english.description_claims` gives them) of the
    names a Chinese ``text`` describing ``name`` states it is: only where the text opens
    with the name (a description about it, not one mentioning it)."""
    own = name_key(name)
    if len(own) != 1 or not _HAN.match(own[0]) or not is_chinese(text):
        return frozenset()
    text = text.strip()
    if not text.startswith(own[0]):
        return frozenset()
    rest = text[len(own[0]):]
    named = []
    found = _IS_NAME_OF.match(rest)
    if found:
        named.append(found.group(1))
    # A clause of the first sentence: a later sentence may have another subject.
    first = re.split(r"[。！？!?]", rest, maxsplit=1)[0]
    named += [m.group(1) for m in _NAMING.finditer(first)]
    claims = set()
    for span in named:
        key = name_key(span)
        if key and key != own:
            claims.add(f"K {' '.join(key)}")
    return frozenset(claims)
