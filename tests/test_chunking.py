"""Chunkers: exact token windows, separator-aware packing, ids, and large inputs."""
from __future__ import annotations

import asyncio
import random
import re
import string

import pytest

from graphrag.operators.chunking import (
    DEFAULT_SEPARATORS,
    chunk_by_separators,
    chunk_by_tokens,
    chunk_id_for,
    doc_id_for,
    encode_long,
)
from graphrag.operators.tokenizer import get_tokenizer

CHUNK_ID = re.compile(r"^chunk-[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer("gpt-4o")


def ordered(chunks: dict) -> list[dict]:
    return sorted(chunks.values(), key=lambda c: (c["full_doc_id"], c["chunk_order_index"]))


def random_text(n_chars: int, seed: int = 7, max_words: int = 25, paragraphs: bool = True) -> str:
    """Varied prose-like text: random words, sentences, paragraphs."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 11))) for _ in range(5000)]
    parts: list[str] = []
    size = 0
    while size < n_chars:
        sentence = " ".join(rng.choice(vocab) for _ in range(rng.randint(4, max_words)))
        sentence = sentence.capitalize() + rng.choice([". ", ". ", "? ", "! ", "; "])
        if paragraphs and rng.random() < 0.15:
            sentence += "\n\n" if rng.random() < 0.7 else "\n"
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)[:n_chars]


# ---------------------------------------------------------------- token windows


def test_token_windows_exact_boundaries_and_overlap(tok):
    text = " ".join(f"word{i}" for i in range(20))
    tokens = tok.encode(text)
    assert len(tokens) == 40
    chunks = ordered(chunk_by_tokens({"doc-1": text}, size=10, overlap=3, tokenizer=tok))
    starts = [0, 7, 14, 21, 28, 35]
    assert len(chunks) == len(starts)
    for index, (chunk, start) in enumerate(zip(chunks, starts)):
        window = tokens[start : start + 10]
        assert chunk["chunk_order_index"] == index
        assert chunk["full_doc_id"] == "doc-1"
        assert chunk["content"] == tok.decode(window)
        assert tok.encode(chunk["content"]) == window  # re-encoding gives the same window
        assert chunk["tokens"] == len(window)
    for prev, nxt in zip(chunks, chunks[1:]):
        prev_tokens, next_tokens = tok.encode(prev["content"]), tok.encode(nxt["content"])
        assert prev_tokens[-3:] == next_tokens[:3]  # exactly 3 shared tokens...
        assert prev_tokens[-4:] != next_tokens[:4]  # ...not more
    assert tok.encode(chunks[-1]["content"]) == tokens[35:]  # the last chunk ends at the end
    assert chunks[-1]["content"].endswith("word19")


@pytest.mark.parametrize("n_tokens, expected_starts", [
    (10, [0]),  # exactly one window
    (9, [0]),
    (17, [0, 7]),  # the second window reaches the end
    (18, [0, 7, 14]),  # one token past: a third window, not a dropped tail
])
def test_token_window_counts_at_the_edges(tok, n_tokens, expected_starts):
    tokens = tok.encode(" ".join(f"word{i}" for i in range(n_tokens)))[:n_tokens]
    text = tok.decode(tokens)
    assert tok.encode(text) == tokens
    chunks = ordered(chunk_by_tokens({"d": text}, size=10, overlap=3, tokenizer=tok))
    assert [tok.encode(c["content"]) for c in chunks] == [tokens[s : s + 10] for s in expected_starts]


def test_token_windows_without_overlap_cover_the_text_exactly(tok):
    text = random_text(20_000, seed=3)
    chunks = ordered(chunk_by_tokens({"d": text}, size=100, overlap=0, tokenizer=tok))
    assert "".join(c["content"] for c in chunks) == text
    assert all(c["tokens"] == 100 for c in chunks[:-1])


def test_chunk_ids_stable_and_content_addressed(tok):
    text = random_text(3000, seed=1)
    first = chunk_by_tokens({"doc-a": text}, size=64, overlap=8, tokenizer=tok)
    second = chunk_by_tokens({"doc-a": text}, size=64, overlap=8, tokenizer=tok)
    assert first == second
    assert list(first) == list(second)
    for chunk_id, chunk in first.items():
        assert CHUNK_ID.match(chunk_id), chunk_id
        assert chunk_id == chunk_id_for(chunk["content"])
    assert CHUNK_ID.match(chunk_id_for("x")) and chunk_id_for("x") != chunk_id_for("y")
    assert re.match(r"^doc-[0-9a-f]{32}$", doc_id_for(text))
    # Another text: other ids. Same text under another doc id: same chunk ids, that doc's id.
    changed = chunk_by_tokens({"doc-a": text + " and more"}, size=64, overlap=8, tokenizer=tok)
    assert set(changed) != set(first)
    other = chunk_by_tokens({"doc-b": text}, size=64, overlap=8, tokenizer=tok)
    assert set(other) == set(first) and all(c["full_doc_id"] == "doc-b" for c in other.values())


def test_several_documents_keep_their_ids_and_order(tok):
    docs = {"doc-x": random_text(2000, seed=10), "doc-y": random_text(1500, seed=11)}
    for chunker in (chunk_by_tokens, chunk_by_separators):
        chunks = chunker(docs, size=50, overlap=5, tokenizer=tok)
        for doc_id, text in docs.items():
            mine = [c for c in ordered(chunks) if c["full_doc_id"] == doc_id]
            assert [c["chunk_order_index"] for c in mine] == list(range(len(mine)))
            assert text.startswith(mine[0]["content"].rstrip()[:20])


@pytest.mark.parametrize("chunker", [chunk_by_tokens, chunk_by_separators])
def test_empty_document_gives_no_chunk(tok, chunker):
    assert chunker({"d": ""}, size=10, overlap=2, tokenizer=tok) == {}
    assert chunker({"d": "   \n\n  "}, size=10, overlap=2, tokenizer=tok) == {}
    assert chunker({}, size=10, overlap=2, tokenizer=tok) == {}


@pytest.mark.parametrize("chunker", [chunk_by_tokens, chunk_by_separators])
@pytest.mark.parametrize("size, overlap", [(10, 10), (10, 11), (10, -1)])
def test_bad_overlap_rejected(tok, chunker, size, overlap):
    with pytest.raises(ValueError):
        chunker({"d": "text"}, size=size, overlap=overlap, tokenizer=tok)


def test_multibyte_text_at_window_edges(tok):
    text = "数据图谱检索增强生成。" * 40 + "🙂" * 30
    chunks = ordered(chunk_by_tokens({"d": text}, size=7, overlap=2, tokenizer=tok))
    assert chunks
    for c in chunks:
        assert "\ufffd" not in c["content"][:1] + c["content"][-1:]
        assert c["content"] in text or c["content"].strip("\ufffd") in text


# ---------------------------------------------------------------- separator packing


def test_separator_chunks_fit_end_at_boundaries_and_overlap(tok):
    text = random_text(30_000, seed=5)
    size, overlap = 200, 60  # every random sentence fits (< 150 tokens), so chunks end at boundaries
    chunks = ordered(chunk_by_separators({"d": text}, size=size, overlap=overlap, tokenizer=tok))
    assert len(chunks) > 10
    boundary_ends = (". ", "? ", "! ", "; ", "\n")
    for c in chunks:
        assert c["tokens"] <= size
        assert tok.count(c["content"]) <= size
        assert c["content"] in text
    for c in chunks[:-1]:
        assert c["content"].endswith(boundary_ends), repr(c["content"][-30:])
    assert text.endswith(chunks[-1]["content"])
    assert text.startswith(chunks[0]["content"])
    # Everything is covered, in order: each chunk starts at or before where the previous one ended.
    position = 0
    for c in chunks:
        found = text.find(c["content"], max(0, position - len(c["content"])))
        assert found != -1 and found <= position
        position = found + len(c["content"])
    assert position == len(text)


def shared_head(prev: str, nxt: str) -> str:
    """The longest start of ``nxt`` that ``prev`` ends with."""
    for k in range(min(len(prev), len(nxt)), 0, -1):
        if prev.endswith(nxt[:k]):
            return nxt[:k]
    return ""


def test_separator_overlap_carries_whole_trailing_sentences(tok):
    # One paragraph of short sentences (each well under the overlap). The packer's pieces are
    # runs of sentences up to a ". ", often bigger than the overlap: their tail is carried.
    text = random_text(20_000, seed=6, max_words=8, paragraphs=False)
    size, overlap = 250, 60
    chunks = ordered(chunk_by_separators({"d": text}, size=size, overlap=overlap, tokenizer=tok))
    assert len(chunks) > 10
    for prev, nxt in zip(chunks, chunks[1:]):
        head = shared_head(prev["content"], nxt["content"])
        assert head, "no overlap carried"
        assert head[0].isupper()  # a whole sentence, not a cut one
        assert head.endswith((". ", "? ", "! ", "; "))
        assert tok.count(head) <= overlap
        assert len(head) < len(nxt["content"])  # the chunk also moves forward
    no_overlap = ordered(chunk_by_separators({"d": text}, size=size, overlap=0, tokenizer=tok))
    assert "".join(c["content"] for c in no_overlap) == text
    assert len(no_overlap) < len(chunks)


def test_separator_chunker_prefers_paragraphs(tok):
    paragraphs = [" ".join(["Sentence number %d in paragraph %d." % (s, p) for s in range(3)]) for p in range(6)]
    text = "\n\n".join(paragraphs)
    chunks = ordered(chunk_by_separators({"d": text}, size=40, overlap=0, tokenizer=tok))
    assert [c["content"].strip() for c in chunks] == paragraphs
    assert all(c["content"].endswith("\n\n") for c in chunks[:-1])


def test_separator_chunker_splits_a_sentence_too_long_for_a_chunk(tok):
    long_sentence = " ".join(f"token{i}" for i in range(300)) + "."
    text = "Short intro. " + long_sentence + " Short outro."
    chunks = ordered(chunk_by_separators({"d": text}, size=30, overlap=5, tokenizer=tok))
    assert all(c["tokens"] <= 30 and tok.count(c["content"]) <= 30 for c in chunks)
    joined = " ".join(c["content"] for c in chunks)
    for word in ("intro", "token0", "token150", "token299", "outro"):
        assert word in joined


def test_default_separators_cover_cjk_sentences(tok):
    assert "。" in DEFAULT_SEPARATORS
    text = "".join(f"这是第{i}个关于知识图谱的句子，用来测试分块。" for i in range(60))
    chunks = ordered(chunk_by_separators({"d": text}, size=40, overlap=0, tokenizer=tok))
    assert len(chunks) > 1
    assert all(c["content"].endswith("。") for c in chunks)
    assert "".join(c["content"] for c in chunks) == text


def test_chinese_exclamations_questions_and_semicolons_end_chunks(tok):
    text = "".join(f"第{i}个问题为什么这样设计？答案写在知识图谱里！" for i in range(30))
    chunks = ordered(chunk_by_separators({"d": text}, size=30, overlap=0, tokenizer=tok))
    assert len(chunks) > 1 and all(c["content"][-1] in "？！" for c in chunks)
    text = "".join(f"第{i}项是实体，第{i}项也是关系；" for i in range(30))
    chunks = ordered(chunk_by_separators({"d": text}, size=30, overlap=0, tokenizer=tok))
    assert len(chunks) > 1 and all(c["content"].endswith("；") for c in chunks)
    assert "".join(c["content"] for c in chunks) == text


# ---------------------------------------------------------------- large inputs


def test_large_varied_document_chunks(tok):
    text = random_text(2_000_000, seed=42)  # the 10 MB case is measured by hand; keep the suite fast
    by_tokens = ordered(chunk_by_tokens({"big": text}, size=1200, overlap=100, tokenizer=tok))
    total = sum(c["tokens"] for c in by_tokens) - 100 * (len(by_tokens) - 1)  # tokens in the text
    assert all(c["tokens"] == 1200 for c in by_tokens[:-1])
    assert text.startswith(by_tokens[0]["content"]) and text.endswith(by_tokens[-1]["content"])
    by_separators = chunk_by_separators({"big": text}, size=1200, overlap=100, tokenizer=tok)
    assert all(c["tokens"] <= 1200 for c in by_separators.values())
    assert len(by_separators) >= total / 1200


def test_megabyte_without_whitespace(tok):
    rng = random.Random(9)
    text = "".join(rng.choices(string.ascii_letters + string.digits, k=1_000_000))
    chunks = ordered(chunk_by_tokens({"blob": text}, size=1200, overlap=0, tokenizer=tok))
    assert "".join(c["content"] for c in chunks) == text
    packed = ordered(chunk_by_separators({"blob": text}, size=1200, overlap=100, tokenizer=tok))
    assert all(c["tokens"] <= 1200 for c in packed)
    assert len(packed) >= len(chunks) - 1


def test_encode_long_matches_plain_encoding_on_prose(tok):
    text = random_text(50_000, seed=8)
    assert tok.decode(encode_long(text, tok)) == text
    # Cut only before whitespace, so token counts match a plain encode closely.
    assert abs(len(encode_long(text, tok)) - len(tok.encode(text))) <= len(text) // 8192 + 1


def test_separator_chunker_plugs_into_insert(tmp_path, tok):
    """chunk_by_separators is the alternative to the default chunker: ``chunk_func=`` it."""
    from graphrag import GraphRAG, hash_embedding

    text = "\n\n".join(f"Paragraph {i}. Alice Marsh met Bob Quill at Harbour Hall. They spoke of lamps." for i in range(40))
    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=hash_embedding(32),
                   chunk_func=chunk_by_separators, chunk_token_size=120, chunk_overlap_token_size=20)
    rag.insert(text)
    stored = rag.stores.text_chunks
    keys = asyncio.run(stored.all_keys())
    expected = chunk_by_separators({doc_id_for(text): text}, size=120, overlap=20, tokenizer=tok)
    assert sorted(keys) == sorted(expected) and len(keys) > 3
    assert all(c["content"].endswith((". ", ".\n\n", ".")) for c in asyncio.run(stored.get_by_ids(keys)))
