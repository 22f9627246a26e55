"""The ``graphrag`` command, run as a subprocess with a fake embedding and offline extraction."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphrag import errors

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "data" / "saltmarsh_lantern_works.md"


def run(*args: str, env_extra: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")}
    env["GRAPHRAG_EMBEDDING"] = "hash"
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "graphrag.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def assert_clean_error(proc: subprocess.CompletedProcess, code: int) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("graphrag: error:")]
    assert len(errors) == 1, proc.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    shutil.copy(EXAMPLE, root / "history.md")
    (root / "sub").mkdir()
    (root / "sub" / "bakery.txt").write_text(
        "Mara Voss founded the Voss Bakery in Tellin. Mara Voss later sold the Voss Bakery to Jonah Reed. "
        "Jonah Reed moved the Voss Bakery to Harbour Lane in Tellin.\n", encoding="utf-8")
    (root / "sub" / "notes.xyz").write_text("Not indexed: no reader for this type.\n", encoding="utf-8")
    (root / "sub" / "blob.txt").write_bytes(b"\x00\x01binary\x00" * 20)
    (root / "latin1.txt").write_bytes("Caf\xe9 Rouge owned by Zo\xe9 Lamarque.".encode("latin-1"))
    return root


@pytest.fixture(scope="module")
def indexed(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    wd = tmp_path_factory.mktemp("cli") / "wd"
    proc = run("index", str(corpus), "--working-dir", str(wd), "--offline", "--chunk-size", "300")
    return wd, proc


def test_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("graphrag ")


def test_help_documents_exit_codes() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    assert "exit codes" in proc.stdout and "OPENAI_API_KEY" in proc.stdout
    assert "--offline" in run("index", "--help").stdout


def test_index_walks_folders_decodes_latin1_and_skips_unreadable(
        indexed: tuple[Path, subprocess.CompletedProcess], corpus: Path) -> None:
    wd, proc = indexed
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {corpus / 'sub' / 'notes.xyz'}: no reader for .xyz" in proc.stderr
    assert f"skipped {corpus / 'sub' / 'blob.txt'}: binary file, not text" in proc.stderr
    assert "latin1.txt" not in proc.stderr  # decoded from Latin-1, not skipped
    assert "Traceback" not in proc.stderr
    summary = proc.stdout.strip().splitlines()
    assert len(summary) == 1
    assert "3 new" in summary[0] and "2 skipped" in summary[0]
    assert "entities" in summary[0] and "communities" in summary[0]
    assert "LLM calls: 0" in summary[0]
    assert (wd / "graph_chunk_entity_relation.graphml").exists()


def test_docs_lists_sources(indexed: tuple[Path, subprocess.CompletedProcess], corpus: Path) -> None:
    wd, _ = indexed
    proc = run("docs", "--working-dir", str(wd), "--json")
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    assert sorted(os.path.basename(d["source"]) for d in docs) == ["bakery.txt", "history.md", "latin1.txt"]
    assert all(d["chars"] > 0 and d["chunks"] >= 1 for d in docs)
    text = run("docs", "--working-dir", str(wd))
    assert text.returncode == 0 and "bakery.txt" in text.stdout and "chunks" in text.stdout


@pytest.mark.parametrize("mode", ["local", "global", "naive"])
def test_query_context_only(indexed: tuple[Path, subprocess.CompletedProcess], mode: str) -> None:
    wd, _ = indexed
    proc = run("query", "What did Ada Pennick, the glassblower, make in Quillhaven?", "--working-dir", str(wd),
               "--mode", mode, "--context-only")
    assert proc.returncode == 0, proc.stderr
    assert "Ada Pennick".lower() in proc.stdout.lower()


def test_query_without_llm_prints_note_and_context(indexed: tuple[Path, subprocess.CompletedProcess]) -> None:
    wd, _ = indexed
    proc = run("query", "Who founded the Voss Bakery?", "--working-dir", str(wd), "--mode", "local")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[No LLM is configured")
    assert "VOSS BAKERY" in proc.stdout.upper()


def test_stats_text_and_json(indexed: tuple[Path, subprocess.CompletedProcess]) -> None:
    wd, _ = indexed
    proc = run("stats", "--working-dir", str(wd), "--json")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["documents"] == 3
    assert stats["chunks"] >= 3 and stats["entities"] > 5 and stats["relations"] > 5
    assert stats["communities"] == sum(stats["communities_per_level"].values()) > 0
    assert stats["llm_cached_responses"] == 0
    assert stats["built_offline"] is True
    assert stats["entity_vectors"]["dim"] == 384
    assert stats["size_bytes"] > 0
    text = run("stats", "--working-dir", str(wd))
    assert text.returncode == 0
    assert "entities" in text.stdout and "size on disk" in text.stdout and "level 0" in text.stdout


def test_stats_loads_no_embedding_model(indexed: tuple[Path, subprocess.CompletedProcess]) -> None:
    wd, _ = indexed
    code = ("import sys; from graphrag.cli import main\n"
            "try:\n    main(['stats', '--working-dir', sys.argv[1]])\n"
            "except SystemExit:\n    pass\n"
            "assert 'sentence_transformers' not in sys.modules and 'torch' not in sys.modules\n"
            "print('NO MODEL')")
    proc = subprocess.run([sys.executable, "-c", code, str(wd)], capture_output=True, text=True,
                          env={**os.environ, "GRAPHRAG_EMBEDDING": "local"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "NO MODEL" in proc.stdout


def test_reindex_changed_file_is_an_update(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    doc = src / "a.txt"
    doc.write_text("Ivo Brandt runs the Brandt Forge in Ostmark. Ivo Brandt trained Lena Kort.\n", encoding="utf-8")
    wd = tmp_path / "wd"
    assert run("index", str(src), "-w", str(wd), "--offline").returncode == 0
    doc.write_text("Ivo Brandt runs the Brandt Forge in Ostmark. Ivo Brandt trained Pavel Sorn.\n", encoding="utf-8")
    again = run("index", str(doc), "-w", str(wd), "--offline")
    assert again.returncode == 0, again.stderr
    assert "0 new, 1 updated" in again.stdout
    docs = json.loads(run("docs", "-w", str(wd), "--json").stdout)
    assert len(docs) == 1 and docs[0]["source"] == str(doc)
    unchanged = run("index", str(doc), "-w", str(wd), "--offline")
    assert "0 new, 0 updated, 1 unchanged" in unchanged.stdout


def test_delete(tmp_path: Path, corpus: Path) -> None:
    wd = tmp_path / "wd"
    assert run("index", str(corpus / "sub"), str(EXAMPLE), "-w", str(wd), "--offline").returncode == 0
    docs = json.loads(run("docs", "-w", str(wd), "--json").stdout)
    bakery = next(d["id"] for d in docs if d["source"].endswith("bakery.txt"))
    proc = run("delete", bakery, "-w", str(wd))
    assert proc.returncode == 0, proc.stderr
    assert "deleted 1 document" in proc.stdout
    left = json.loads(run("docs", "-w", str(wd), "--json").stdout)
    assert [d["id"] for d in left] != [] and bakery not in {d["id"] for d in left}
    stats = json.loads(run("stats", "-w", str(wd), "--json").stdout)
    assert stats["documents"] == 1
    assert_clean_error(run("delete", bakery, "-w", str(wd)), 1)


def test_missing_path_exits_2(tmp_path: Path) -> None:
    proc = run("index", str(tmp_path / "nope"), "-w", str(tmp_path / "wd"), "--offline")
    assert_clean_error(proc, 2)
    assert "nope" in proc.stderr
    assert not (tmp_path / "wd").exists()


def test_empty_input_exits_1(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_clean_error(run("index", str(empty), "-w", str(tmp_path / "wd"), "--offline"), 1)
    (empty / "blank.txt").write_text("  \n\n", encoding="utf-8")
    assert_clean_error(run("index", str(empty), "-w", str(tmp_path / "wd"), "--offline"), 1)


def test_missing_working_dir_exits_2(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    for args in (["query", "anything?"], ["stats"], ["docs"], ["delete", "doc-x"]):
        assert_clean_error(run(*args, "--working-dir", missing), 2)
    assert not os.path.exists(missing)


def test_query_on_empty_working_dir_says_so(tmp_path: Path) -> None:
    proc = run("query", "Who?", "-w", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "No documents are indexed" in proc.stdout


def test_no_llm_configured_exits_3(tmp_path: Path, corpus: Path) -> None:
    proc = run("index", str(corpus / "sub"), "-w", str(tmp_path / "wd"))
    assert_clean_error(proc, 3)
    assert "OPENAI_API_KEY" in proc.stderr and "--offline" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run("query", "x?", "-w", str(tmp_path), "--mode", "bogus").returncode == 2
    assert run("index", "-w", str(tmp_path)).returncode == 2
    assert run().returncode == 2


def test_a_bad_query_option_exits_2(tmp_path: Path) -> None:
    proc = run("query", "x?", "-w", str(tmp_path), "--top-k", "-1")
    assert_clean_error(proc, 2)
    assert "top_k must be >= 0" in proc.stderr


def _main_raising(error: BaseException, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> int:
    """``main`` for a command that raises ``error``; its exit code (or ``error`` itself, raised)."""
    from graphrag import cli

    def command(args: Any) -> int:
        raise error

    monkeypatch.setattr(cli, "_setup_logging", lambda verbose: None)  # leave the test's root logger be
    monkeypatch.setattr(cli, "cmd_docs", command)
    with pytest.raises(SystemExit) as exit:
        cli.main(["docs", "-w", str(tmp_path)])
    return exit.value.code


@pytest.mark.parametrize("error, code, says", [
    (errors.LLMError("extraction", RuntimeError("server down"), 7), 3, "server down"),
    (errors.ContextOverflowError("query", RuntimeError("maximum context length is 10"), hint="set the windows"),
     3, "--context-window TOKENS"),
    (errors.NoLLMConfiguredError("No LLM is configured."), 3, "--offline"),
    (errors.StorageError("cannot read kv_store_full_docs.json"), 1, "kv_store_full_docs.json"),
    (errors.WorkingDirLockedError("another process holds the lock"), 1, "holds the lock"),
    (errors.DocumentNotFound("unknown document id(s): doc-x"), 1, "unknown document id(s): doc-x"),
    (errors.ConfigurationError("chunk_token_size must be positive"), 2, "chunk_token_size"),
    (errors.ContextWindowError("best_model_max_token_size=100 leaves 0 tokens"), 2, "leaves 0 tokens"),
    (errors.InvalidInputError("query must be a non-empty string"), 2, "non-empty"),
], ids=["llm", "context-overflow", "no-llm", "storage", "locked", "document-not-found", "configuration",
        "context-window", "invalid-input"])
def test_engine_errors_map_to_exit_codes(error: Exception, code: int, says: str, monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _main_raising(error, monkeypatch, tmp_path) == code
    stderr = capsys.readouterr().err
    assert stderr.startswith("graphrag: error:") and len(stderr.strip().splitlines()) == 1
    assert says in stderr


@pytest.mark.parametrize("bug", [ValueError("a bug"), KeyError("a bug"), TypeError("a bug")])
def test_an_unexpected_error_is_a_bug_and_keeps_its_traceback(bug: Exception, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Not an exit 1 with one line: the exception leaves ``main`` (Python prints its traceback)."""
    with pytest.raises(type(bug)) as info:
        _main_raising(bug, monkeypatch, tmp_path)
    assert info.value is bug


def test_index_with_llm_server_and_usage_in_stats(tmp_path: Path, corpus: Path, llm_server) -> None:
    env = {"OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "test-key"}
    wd = tmp_path / "wd"
    proc = run("index", str(corpus / "sub"), "-w", str(wd), env_extra=env)
    assert proc.returncode == 0, proc.stderr
    assert "LLM calls: 0" not in proc.stdout
    stats = json.loads(run("stats", "-w", str(wd), "--json").stdout)
    assert stats["built_offline"] is False
    assert stats["llm_cached_responses"] > 0
    assert stats["llm_usage_total"].get("calls", 0) > 0
    answer = run("query", "Who owns the Voss Bakery?", "-w", str(wd), "--mode", "local", env_extra=env)
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() and not answer.stdout.startswith("[No LLM")


def test_llm_flags_name_the_model_and_fit_its_window(tmp_path: Path) -> None:
    """A local server names its own model and window: the flags reach every request, and a
    window the server enforces is respected; without it the refusal is one line, exit 3."""
    from mock_llm_server import MockLLMServer

    text = " ".join(
        f"Captain Orla Venn{i} of Gull Point traded lamp oil with the Lantern Guild{i % 3} and Harbourmaster "
        f"Idris Cole{i % 5}, who signed the charter of the Lantern Guild{i % 3} in Saltmarsh." for i in range(150))
    (tmp_path / "chronicle.txt").write_text(text, encoding="utf-8")
    wd = str(tmp_path / "wd")
    with MockLLMServer(context_window=3000) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"}
        flags = ["--model", "qwen-local", "--context-window", "3000", "--max-async", "4"]
        proc = run("index", str(tmp_path / "chronicle.txt"), "-w", wd, *flags, env_extra=env)
        assert proc.returncode == 0, proc.stderr
        assert {r["model"] for r in server.chat_requests} == {"qwen-local"}
        assert server.stats()["peak_concurrency"] <= 4

        server.reset()
        refused = run("query", "Who traded lamp oil?", "-w", wd, "--mode", "naive", "--model", "qwen-local",
                      env_extra=env)
        assert_clean_error(refused, 3)
        assert "maximum context length is 3000" in refused.stderr and "--context-window TOKENS" in refused.stderr
        answer = run("query", "Who traded lamp oil?", "-w", wd, "--mode", "naive", *flags, env_extra=env)
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip()

    assert_clean_error(run("query", "x?", "-w", wd, "--context-window", "0"), 2)


def test_a_window_too_small_for_the_question_exits_2_with_one_line(
        indexed: tuple[Path, subprocess.CompletedProcess]) -> None:
    """The engine's ContextWindowError, raised before any call, is a usage error, not a crash."""
    wd, _ = indexed
    proc = run("query", "What did Ada Pennick make?", "--working-dir", str(wd), "--context-only",
               "--context-window", "300")
    assert_clean_error(proc, 2)
    assert "best_model_max_token_size=300" in proc.stderr


def test_deleting_an_unknown_document_exits_1_with_one_line(
        indexed: tuple[Path, subprocess.CompletedProcess]) -> None:
    wd, _ = indexed
    proc = run("delete", "doc-not-there", "--working-dir", str(wd))
    assert_clean_error(proc, 1)
    assert "doc-not-there" in proc.stderr


def test_the_lexical_channel_by_flag_and_environment(tmp_path: Path) -> None:
    """``--no-lexical`` (or GRAPHRAG_LEXICAL_RETRIEVAL=0) keeps no BM25 index and asks none;
    by default a Chinese question the fake embedding cannot read finds its passage through it."""
    doc = tmp_path / "dunhuang.txt"
    doc.write_text("敦煌位于甘肃省西北部，附近的莫高窟保存了大量壁画。1900年，道士王圆箓发现了藏经洞。\n\n"
                   "深圳是广东省的城市，华为技术有限公司的总部设在这里。\n", encoding="utf-8")
    question = ("query", "藏经洞是谁发现的？", "--mode", "naive", "--context-only")
    off, on = tmp_path / "off", tmp_path / "on"
    assert run("index", str(doc), "--working-dir", str(off), "--offline", "--no-lexical").returncode == 0
    assert run("index", str(doc), "--working-dir", str(on), "--offline").returncode == 0
    assert not (off / "kv_store_lexical_index.json").exists() and (on / "kv_store_lexical_index.json").exists()
    assert "王圆箓" in run(*question, "--working-dir", str(on)).stdout
    for proc in (run(*question, "--working-dir", str(on), "--no-lexical"),
                 run(*question, "--working-dir", str(on), env_extra={"GRAPHRAG_LEXICAL_RETRIEVAL": "off"})):
        assert proc.returncode == 0, proc.stderr
        assert "王圆箓" not in proc.stdout
    assert_clean_error(run(*question, "--working-dir", str(on), env_extra={"GRAPHRAG_LEXICAL_RETRIEVAL": "maybe"}),
                       2)
    assert "--no-lexical" in run("index", "--help").stdout and "GRAPHRAG_LEXICAL_RETRIEVAL" in run("--help").stdout
