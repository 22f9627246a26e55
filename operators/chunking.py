"""Documents to chunks: token windows with overlap, or separator-aware packing."""
from __future__ import annotations

from typing import Optional, Sequence

from xxhash import xxh128_hexdigest

from graphrag.schema import ChunkRecord

from .tokenizer import Tokenizer, get_tokenizer

# tiktoken slows down badly on very long runs without whitespace; encode in bounded pieces.
_PIECE_CHARS = 8192
# Coarsest first: paragraphs, lines, sentence ends (Latin, then Chinese, which need no space
# after them), clauses, words.
DEFAULT_SEPARATORS = ("\n\n", "\n", ". ", "! ", "? ", "。", "！", "？", "；", "; ", "，", ", ", " ")


def compute_id(content: str, prefix: str) -> str:
    """Content-addressed id: the same text always gets the same id."""
    return f"{prefix}{xxh128_hexdigest(content.encode('utf-8', 'surrogatepass'))}"


def doc_id_for(content: str) -> str:
    return compute_id(content, "doc-")


def chunk_id_for(content: str) -> str:
    return compute_id(content, "chunk-")


def _bounded_pieces(text: str) -> list[str]:
    """Split ``text`` into pieces of at most _PIECE_CHARS, cutting before whitespace when possible."""
    pieces = []
    start = 0
    while len(text) - start > _PIECE_CHARS:
        low, high = start + _PIECE_CHARS // 2, start + _PIECE_CHARS
        cut = max(text.rfind(ws, low, high) for ws in (" ", "\n", "\t"))
        cut = cut if cut > start else high
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def encode_long(text: str, tokenizer: Tokenizer) -> list[int]:
    tokens: list[int] = []
    for part in tokenizer.encode_batch(_bounded_pieces(text)):
        tokens.extend(part)
    return tokens


def _clean_edges(text: str) -> str:
    # A window boundary may cut a multi-byte character; drop the replacement marks it leaves.
    return text.strip("\ufffd")


def _records(doc_id: str, contents: Sequence[tuple[str, int]]) -> dict[str, ChunkRecord]:
    out: dict[str, ChunkRecord] = {}
    for index, (content, tokens) in enumerate(contents):
        if not content.strip():
            continue
        out.setdefault(
            chunk_id_for(content),
            ChunkRecord(content=content, tokens=tokens, full_doc_id=doc_id, chunk_order_index=index),
        )
    return out


def _checked(size: int, overlap: int, tokenizer: Optional[Tokenizer]) -> Tokenizer:
    """The tokenizer a chunker uses (the default one when none is given), once its sizes are valid."""
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be >= 0 and smaller than size (got {overlap} and {size})")
    return tokenizer or get_tokenizer()


def chunk_by_tokens(
    docs: dict[str, str],
    size: int = 1200,
    overlap: int = 100,
    tokenizer: Optional[Tokenizer] = None,
) -> dict[str, ChunkRecord]:
    """Fixed windows of ``size`` tokens, each starting ``size - overlap`` after the last."""
    tokenizer = _checked(size, overlap, tokenizer)
    step = size - overlap
    out: dict[str, ChunkRecord] = {}
    for doc_id, text in docs.items():
        tokens = encode_long(text, tokenizer)
        windows = [tokens[start : start + size] for start in range(0, max(len(tokens) - overlap, 1), step)]
        texts = tokenizer.decode_batch(windows)
        for chunk_id, record in _records(doc_id, [(_clean_edges(t), len(w)) for t, w in zip(texts, windows)]).items():
            out.setdefault(chunk_id, record)
    return out


def _split_to_fit(text: str, separators: Sequence[str], size: int, tokenizer: Tokenizer) -> list[tuple[str, int]]:
    """Pieces of at most ``size`` tokens, split at the coarsest separator that works.

    Text longer than 8 characters a token cannot fit, so it is split without being
    encoded; every piece is encoded about once, keeping this linear in the document.
    """
    if not separators:
        tokens = encode_long(text, tokenizer)
        windows = [tokens[s : s + size] for s in range(0, len(tokens), size)]
        return [(_clean_edges(t), len(w)) for t, w in zip(tokenizer.decode_batch(windows), windows)]
    sep, rest = separators[0], separators[1:]
    parts = text.split(sep)
    parts = [p + sep for p in parts[:-1]] + [parts[-1]]
    countable = [p for p in parts if p and len(p) <= 8 * size]
    counts = dict(zip(countable, (len(t) for t in tokenizer.encode_batch(countable))))
    out: list[tuple[str, int]] = []
    for part in parts:
        if not part:
            continue
        count = counts.get(part)
        if count is not None and count <= size:
            out.append((part, count))
        else:
            out.extend(_split_to_fit(part, rest, size, tokenizer))
    return out


def _overlap_tail(piece: str, separators: Sequence[str], overlap: int, tokenizer: Tokenizer) -> list[tuple[str, int]]:
    """The end of ``piece`` split into sub-pieces of at most ``overlap`` tokens.

    Only the last ``8 * overlap`` characters are looked at (enough for ``overlap`` tokens),
    so the cost stays small; a sub-piece cut by that window is dropped.
    """
    window = piece[-8 * overlap :]
    sub = _split_to_fit(window, separators, overlap, tokenizer)
    return sub[1:] if len(window) < len(piece) else sub


def chunk_by_separators(
    docs: dict[str, str],
    size: int = 1200,
    overlap: int = 100,
    tokenizer: Optional[Tokenizer] = None,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> dict[str, ChunkRecord]:
    """Pack whole paragraphs/sentences into chunks of at most ``size`` tokens; the engine
    uses it when configured with ``chunk_func=chunk_by_separators``.

    Chunks end at natural boundaries; each new chunk repeats the trailing pieces of
    the previous one, up to ``overlap`` tokens, so a fact cut at a border is still whole
    in one of the two chunks.
    """
    tokenizer = _checked(size, overlap, tokenizer)
    out: dict[str, ChunkRecord] = {}
    for doc_id, text in docs.items():
        pieces = _split_to_fit(text, tuple(separators), size, tokenizer)
        chunks: list[tuple[str, int]] = []
        current: list[tuple[str, int]] = []
        current_tokens = 0
        for piece, count in pieces:
            if current and current_tokens + count > size:
                chunks.append(("".join(p for p, _ in current), current_tokens))
                carried: list[tuple[str, int]] = []
                carried_tokens = 0
                tail = current
                if overlap and current[-1][1] > overlap:
                    # The last piece (often a whole paragraph) is too big to repeat: repeat its
                    # trailing sentences instead, or the overlap would vanish on ordinary prose.
                    tail = _overlap_tail(current[-1][0], tuple(separators), overlap, tokenizer)
                for p, c in reversed(tail):
                    if carried_tokens + c > overlap or carried_tokens + c + count > size:
                        break
                    carried.insert(0, (p, c))
                    carried_tokens += c
                current, current_tokens = carried, carried_tokens
            current.append((piece, count))
            current_tokens += count
        if current:
            chunks.append(("".join(p for p, _ in current), current_tokens))
        for chunk_id, record in _records(doc_id, chunks).items():
            out.setdefault(chunk_id, record)
    return out
