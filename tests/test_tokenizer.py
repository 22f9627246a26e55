"""The tokenizer works with no network and an empty tiktoken cache."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from graphrag.operators.tokenizer import TiktokenTokenizer, fewest_tokens, fits, get_tokenizer

# "hello world" in the two encodings (well-known reference values).
O200K_HELLO_WORLD = [24912, 2375]
CL100K_HELLO_WORLD = [15339, 1917]

OFFLINE_SCRIPT = """
import json, os, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network access attempted in an offline test")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from graphrag.operators.tokenizer import get_tokenizer

gpt4o = get_tokenizer("gpt-4o")
gpt4 = get_tokenizer("gpt-4")
print(json.dumps({
    "o200k": gpt4o.encode("hello world"),
    "o200k_name": gpt4o.encoding_name,
    "cl100k": gpt4.encode("hello world"),
    "cl100k_name": gpt4.encoding_name,
    "round_trip": gpt4o.decode(gpt4o.encode("Grüße, 世界! <|endoftext|>")),
    "cache": sorted(os.listdir(os.environ["TIKTOKEN_CACHE_DIR"])),
}))
"""


def run_offline(cache_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_GYM_CACHE_DIR",)}
    env["TIKTOKEN_CACHE_DIR"] = cache_dir
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[proxy] = "http://127.0.0.1:9"  # unreachable, in case anything bypasses the patch
    out = subprocess.run([sys.executable, "-c", OFFLINE_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tokenizer_offline_with_empty_cache(tmp_path):
    cache = tmp_path / "empty" / "tiktoken-cache"  # not even created yet
    result = run_offline(str(cache))
    assert result["o200k"] == O200K_HELLO_WORLD
    assert result["o200k_name"] == "o200k_base"
    assert result["cl100k"] == CL100K_HELLO_WORLD
    assert result["cl100k_name"] == "cl100k_base"
    assert result["round_trip"] == "Grüße, 世界! <|endoftext|>"  # special-token text is plain text
    # Both encodings were installed from the bundled copies, and their ranks cached.
    assert len(result["cache"]) == 4 and sum(name.endswith(".ranks") for name in result["cache"]) == 2
    again = run_offline(str(cache))  # a second process reads the cached ranks
    assert again == result


SAMPLES = ["hello world", "Grüße, 世界! <|endoftext|>", "   \n\t  spaces", "x" * 3000, "Don't we'll 12345 ..."]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_cached_ranks_encode_exactly_as_tiktoken(name, tmp_path, monkeypatch):
    import tiktoken

    from graphrag.operators import tokenizer as module

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    module.install_bundled_encoding(name)
    reference = tiktoken.get_encoding(name)
    path = module._ranks_cache_path(name)
    first = module.load_encoding(name)  # writes the cache
    assert os.path.exists(path)
    with open(path, "r+b") as f:  # a damaged cache is not trusted, and is rebuilt
        f.seek(40)
        f.write(b"\xff" * 16)
    assert module._read_ranks_cache(path) is None
    damaged = module.load_encoding(name)
    cached = module.load_encoding(name)
    assert module._read_ranks_cache(path) is not None
    for enc in (first, damaged, cached):
        assert enc.n_vocab == reference.n_vocab and enc.special_tokens_set == reference.special_tokens_set
        for text in SAMPLES:
            assert enc.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())
            assert enc.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")


def test_disabled_cache_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    from graphrag.operators import tokenizer as module

    with pytest.raises(RuntimeError, match="TIKTOKEN_CACHE_DIR"):
        module.install_bundled_encoding("o200k_base")


def test_tokenizer_helpers():
    tok = get_tokenizer("gpt-4o")
    assert get_tokenizer("gpt-4o") is tok
    text = "The quick brown fox jumps over the lazy dog. " * 5
    tokens = tok.encode(text)
    assert tok.count(text) == len(tokens)
    assert tok.decode(tokens) == text
    assert tok.encode_batch(["hello world", ""]) == [O200K_HELLO_WORLD, []]
    assert tok.decode_batch([O200K_HELLO_WORLD, []]) == ["hello world", ""]
    assert tok.truncate(text, 1000) == text
    short = tok.truncate(text, 7)
    assert tok.encode(short) == tokens[:7] and text.startswith(short)
    assert tok.truncate(text, 0) == tok.truncate(text, -3) == ""  # a spent budget keeps nothing


@pytest.mark.parametrize("text", ["", "plain ascii words", "naïve café ümlaut", "日本語のテキスト", "🙂🙃" * 3,
                                  "x" * 50 + "漢字" * 20])
def test_fits_agrees_with_counting(text):
    tok = get_tokenizer("gpt-4o")
    n = tok.count(text)
    for budget in {0, max(n - 1, 0), n, n + 1, len(text.encode("utf-8"))}:
        assert fits(tok, text, budget) == (n <= budget)
        assert tok.count(tok.truncate(text, budget)) <= budget


def test_fits_skips_tokenising_short_texts():
    class Counting:
        calls = 0

        def count(self, text):
            self.calls += 1
            return len(text)

    tok = Counting()
    assert fits(tok, "short", 5) and tok.calls == 0
    assert not fits(tok, "longer text", 5) and tok.calls == 1


@pytest.mark.parametrize("encoding", ["gpt-4o", "cl100k_base"])
def test_a_table_over_its_budget_is_counted_only_until_past_it(encoding):
    """Counted piece by piece at the line cuts, a table is found to fit or not exactly as
    counting it whole finds, and one far over the budget is not tokenised whole."""
    tok = get_tokenizer(encoding)
    cells = ['plain words', 'a "quoted", cell', 'ends with a newline\n', '1990\n2001 dates', '```fenced```',
             '中文的描述。', 'emoji 🙂!', '  leading spaces', 'trailing. ']
    lines = [f'{i},"{cells[i % len(cells)]}",{cells[(i * 4) % len(cells)]}\n' for i in range(300)]
    text = "-----Entities-----\n```csv\nid,name,description\n" + "".join(lines) + "```\n"
    n = tok.count(text)
    parts = ["-----Entities-----\n", "```csv\nid,name,description\n", *lines, "```\n"]
    shuffled = random.Random(3).sample(parts, len(parts))
    for budget in (0, 1, 50, n // 2, n - 1, n, n + 1):
        assert fits(tok, text, budget) == (n <= budget)
        # cut at the line cuts and counted in any order, the same answer
        assert fits(tok, text, budget, shuffled) == (n <= budget)

    class Counting:
        counts_add_by_line = True
        counted = 0

        def count(self, piece):
            Counting.counted += len(piece)
            return tok.count(piece)

    assert not fits(Counting(), text, 200) and Counting.counted < len(text) // 10


@pytest.mark.parametrize("encoding", ["gpt-4o", "cl100k_base"])
def test_a_text_has_at_least_its_fewest_tokens(encoding):
    """The word count less the slashes after newlines is a floor on the count, on text mixing
    the characters that could break it (newlines into a slash, separators str.split takes for
    spaces, Unicode spaces); so a table with more words than the budget is over it uncounted."""
    tok = get_tokenizer(encoding)
    assert tok.counts_words
    pieces = ["a", "word", " ", "\n", "\r", "/", ".", ",", "\x1c", "\xa0", "\u3000", "\t", "1234", "中文", "🙂",
              "'s", "--", "\n/", "é", "\u2028", "\x85", "x/y", "//", ")"]
    rng = random.Random(1)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        assert fewest_tokens(text) <= tok.count(text), text
    table = "".join(f"{i},NAME {i},a description of some words\n" for i in range(400))
    assert fewest_tokens(table) > 2000 and not fits(tok, table, 2000)


def test_unknown_model_falls_back_to_o200k():
    tok = TiktokenTokenizer("my-private-model-xyz")
    assert tok.encoding_name == "o200k_base"
    assert tok.encode("hello world") == O200K_HELLO_WORLD
    assert TiktokenTokenizer("cl100k_base").encode("hello world") == CL100K_HELLO_WORLD



def test_a_cache_file_is_written_through_a_fresh_name_not_a_planted_link(tmp_path):
    """The caches live in the shared temp dir: a link planted where a predictable temporary
    name would be must neither be followed nor stop the write."""
    from graphrag.operators.tokenizer import replace_file

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me")
    target = tmp_path / "cache.bin"
    os.symlink(victim, f"{target}.{os.getpid()}.tmp")  # the name the write once used
    replace_file(str(target), b"cached")
    assert target.read_bytes() == b"cached" and victim.read_bytes() == b"keep me"
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["victim.txt", "cache.bin", f"cache.bin.{os.getpid()}.tmp"])
