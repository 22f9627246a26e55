"""Folders of real-world files, end to end: what gets indexed with which positions, what is
skipped and why, and what re-indexing, editing and moving files cost."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


from graphrag import GraphRAG, hash_embedding
from graphrag.file_insert import walk
from graphrag.query_param import QueryParam
from graphrag.records import Chunk
from helpers_files import write_docx, write_html, write_jsonl, write_pdf
from mock_llm_server import MockLLMServer, detect_kind

PAGE_1 = ["Ada Pennick blew glass lanterns in Quillhaven for the Harbour Guild.",
          "Ada Pennick trained Corin Vale at the Quillhaven furnace."]
PAGE_2 = ["Bram Ostrow sold the Quillhaven lanterns at the Tidewater Market.",
          "The Tidewater Market paid Bram Ostrow in silver."]


def make_folder(root: Path) -> Path:
    """The mixed folder the issue names: a two-page PDF, a .docx with headings, an HTML page
    with navigation and a script, a JSONL file, a Latin-1 text file and a corrupt PDF."""
    (root / "sub").mkdir(parents=True)
    write_pdf(root / "report.pdf", [PAGE_1, PAGE_2], title="Lantern Report")
    write_docx(root / "handbook.docx", "Guild Handbook",
               [("Safety", ["Mila Dorn inspects the Quillhaven furnace every week."]),
                ("Trade", ["The Harbour Guild sets the price of lanterns in Quillhaven."])])
    write_html(root / "sub" / "market.html", "Tidewater Market", "Market days",
               ["Bram Ostrow opens his stall at the Tidewater Market on Fridays."])
    write_jsonl(root / "sub" / "notes.jsonl", [
        {"id": "n1", "title": "Relit", "text": "Corin Vale relit the Quillhaven furnace in March."},
        {"id": "n2", "title": "Sales", "text": "Bram Ostrow sold forty lanterns to Ferrin Shipping."},
    ])
    (root / "cafe.txt").write_bytes("Café Rouge in Quillhaven is owned by Zoé Lamarque.".encode("latin-1"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrunc")
    (root / "empty.md").write_bytes(b"")
    (root / ".hidden.txt").write_text("Never indexed: hidden.")
    return root


def offline_rag(wd: Path, **overrides: Any) -> GraphRAG:
    return GraphRAG(working_dir=str(wd), extraction="nlp", embedding_func=hash_embedding(64), show_progress=False,
                    **overrides)


def chunks_of(rag: GraphRAG) -> list[Chunk]:
    async def read() -> list[Chunk]:
        store = rag.stores.text_chunks
        keys = await store.all_keys()
        return [Chunk.from_stored(k, r) for k, r in zip(keys, await store.get_by_ids(keys)) if r]

    import asyncio

    return asyncio.run(read())


def dir_state(wd: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in wd.iterdir() if p.is_file()}


def test_a_mixed_folder_is_indexed_with_positions_and_bad_files_skipped(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    rag = offline_rag(tmp_path / "wd")
    report = rag.insert_files(str(root))
    assert sorted(os.path.basename(p) for p in report.indexed) == [
        "cafe.txt", "handbook.docx", "market.html", "notes.jsonl", "report.pdf"]
    assert report.skipped == {str(root / "broken.pdf"): report.skipped[str(root / "broken.pdf")],
                              str(root / "empty.md"): "empty file"}
    assert report.skipped[str(root / "broken.pdf")].startswith("corrupt PDF")
    assert report.stats["documents_inserted"] == 6  # two records in the JSONL file

    chunks = chunks_of(rag)
    by_file = {os.path.basename(c.source or ""): c for c in chunks}
    pdf = by_file["report.pdf"]
    assert pdf.pages == (1, 2) and pdf.title == "Lantern Report" and pdf.citation == "report.pdf p. 1-2"
    assert PAGE_1[0] in pdf.content and PAGE_2[1] in pdf.content
    docx = by_file["handbook.docx"]
    assert docx.headings == ("Safety", "Trade") and docx.title == "Guild Handbook"
    html = by_file["market.html"]
    assert "Fridays" in html.content and "Shop menu" not in html.content and "analytics" not in html.content
    assert "Zoé Lamarque" in by_file["cafe.txt"].content
    records = sorted((c.source or "").rsplit("#", 1)[-1] for c in chunks if "notes.jsonl" in (c.source or ""))
    assert records == ["n1", "n2"]
    docs = {d["source"]: d for d in rag.list_documents()}
    assert str(root / ".hidden.txt") not in docs and len(docs) == 6


def test_pages_follow_the_chunks_of_a_long_pdf(tmp_path: Path) -> None:
    pages = [[f"Page {n} tells how lantern {n}-{i} was blown in Quillhaven." for i in range(25)] for n in range(1, 6)]
    write_pdf(tmp_path / "long.pdf", pages)
    rag = offline_rag(tmp_path / "wd", chunk_token_size=120, chunk_overlap_token_size=10)
    rag.insert_files(str(tmp_path / "long.pdf"))
    chunks = chunks_of(rag)
    assert len(chunks) > 5
    for chunk in chunks:
        found = {int(n) for n in __import__("re").findall(r"Page (\d) ", chunk.content)}
        assert chunk.pages[0] <= min(found) and max(found) <= chunk.pages[-1]
        assert chunk.pages[-1] - chunk.pages[0] <= 1
    assert {p for c in chunks for p in c.pages} == {1, 2, 3, 4, 5}


def test_reindexing_costs_nothing_and_an_edit_updates_only_that_file(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    wd = tmp_path / "wd"
    offline_rag(wd).insert_files(str(root))
    before = dir_state(wd)
    again = offline_rag(wd).insert_files(str(root))
    assert again.indexed == [] and again.updated == [] and len(again.unchanged) == 5
    assert again.stats["documents_inserted"] == 0 and again.stats["chunks_inserted"] == 0
    assert dir_state(wd) == before  # nothing written at all

    write_pdf(root / "report.pdf", [PAGE_1, PAGE_2 + ["Ferrin Shipping bought the last lantern."]],
              title="Lantern Report")
    rag = offline_rag(wd)
    edited = rag.insert_files(str(root))
    assert edited.updated == [str(root / "report.pdf")] and len(edited.unchanged) == 4
    assert edited.stats["documents_inserted"] == 1 and edited.stats["documents_removed"] == 1
    sources = [d["source"] for d in rag.list_documents()]
    assert sources.count(str(root / "report.pdf")) == 1 and len(sources) == 6
    assert any("Ferrin Shipping bought" in c.content and c.pages == (1, 2) for c in chunks_of(rag))


def test_a_moved_file_is_recognised_not_extracted_again(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    wd = tmp_path / "wd"
    offline_rag(wd).insert_files(str(root))
    (root / "archive").mkdir()
    os.rename(root / "report.pdf", root / "archive" / "lanterns-2024.pdf")
    rag = offline_rag(wd)
    moved = rag.insert_files(str(root))
    assert moved.moved == [str(root / "archive" / "lanterns-2024.pdf")] and moved.indexed == []
    assert moved.stats["chunks_inserted"] == 0 and moved.stats["documents_moved"] == 1
    rag = offline_rag(wd)  # as committed
    sources = {d["source"] for d in rag.list_documents()}
    assert str(root / "archive" / "lanterns-2024.pdf") in sources and str(root / "report.pdf") not in sources
    pdf_chunks = [c for c in chunks_of(rag) if c.pages]
    assert pdf_chunks and all(c.citation == "lanterns-2024.pdf p. 1-2" for c in pdf_chunks)


def test_a_copy_keeps_the_first_source(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    wd = tmp_path / "wd"
    offline_rag(wd).insert_files(str(root))
    (root / "copy.pdf").write_bytes((root / "report.pdf").read_bytes())
    report = offline_rag(wd).insert_files(str(root))
    assert report.skipped[str(root / "copy.pdf")] == f"same content as {root / 'report.pdf'}"
    assert report.moved == [] and len(report.unchanged) == 5


def test_include_and_exclude_globs(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("generated")
    (root / "readme.rst2").write_text("odd suffix, included on purpose")
    picked = dict(walk([str(root)], include=["*.pdf", "*.rst2"]))
    assert sorted(os.path.basename(p) for p in picked) == ["broken.pdf", "readme.rst2", "report.pdf"]
    assert all(picked.values())  # included on purpose: read as text if no reader knows the type
    names = [os.path.basename(p) for p, _ in walk([str(root)], exclude=["build", "sub/*.jsonl"])]
    assert "out.txt" not in names and "notes.jsonl" not in names and "market.html" in names
    assert ".hidden.txt" not in names


def test_query_context_cites_pages(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    write_pdf(root / "report.pdf", [["Intro page about the guild."] * 3, PAGE_1, PAGE_2], title="Lantern Report")
    (root / "plain.txt").write_text("Corin Vale keeps the Quillhaven furnace log.")
    rag = offline_rag(tmp_path / "wd", enable_naive_rag=True, chunk_token_size=40, chunk_overlap_token_size=4)
    rag.insert_files(str(root))
    naive = rag.query("Who sold lanterns at the Tidewater Market?", QueryParam(mode="naive", only_need_context=True))
    # 40-token windows: the chunk with the answer starts at the end of page 2
    assert "[report.pdf p. 2-3] ick trained Corin Vale at the Quillhaven furnace.\n\nBram Ostrow sold" in naive
    local = rag.query("Bram Ostrow and the Tidewater Market", QueryParam(mode="local", only_need_context=True))
    assert "[report.pdf p. 2-3] ick trained" in local
    corin = rag.query("Corin Vale furnace log", QueryParam(mode="naive", only_need_context=True))
    assert "plain.txt] Corin Vale keeps" in corin


def test_plain_inserts_keep_the_old_chunk_and_context_format(tmp_path: Path) -> None:
    rag = offline_rag(tmp_path / "wd", enable_naive_rag=True)
    rag.insert(["Bram Ostrow sold lanterns at the Tidewater Market."], sources=["manual"])
    [chunk] = chunks_of(rag)
    assert chunk.source is None and chunk.citation is None
    context = rag.query("Tidewater Market", QueryParam(mode="naive", only_need_context=True))
    assert context == "Bram Ostrow sold lanterns at the Tidewater Market."


def test_with_an_llm_reindexing_makes_no_call_and_an_edit_extracts_only_its_chunks(
        tmp_path: Path, server: MockLLMServer) -> None:
    root = make_folder(tmp_path / "docs")
    settings = dict(working_dir=str(tmp_path / "wd"), embedding_func=hash_embedding(64), show_progress=False,
                    llm_base_url=server.base_url, llm_api_key="k")
    first = GraphRAG(**settings).insert_files(str(root))
    assert first.stats["llm"]["extraction"]["calls"] >= 6
    server.reset()
    GraphRAG(**settings).insert_files(str(root))
    assert server.chat_requests == []
    (root / "cafe.txt").write_text("Café Rouge in Quillhaven is now owned by Ilse Marrow.", encoding="utf-8")
    edited = GraphRAG(**settings).insert_files(str(root))
    assert edited.updated == [str(root / "cafe.txt")]
    extraction_calls = [r for r in server.chat_requests if detect_kind(r) == "extraction"]
    assert len(extraction_calls) == 1 and "Ilse Marrow" in json.dumps(extraction_calls[0])


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRAPHRAG_EMBEDDING": "hash"}
    return subprocess.run([sys.executable, "-m", "graphrag.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_cli_index_json_summary_lists_skipped_files_with_reasons(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    wd = tmp_path / "wd"
    proc = _cli("index", str(root), "-w", str(wd), "--offline", "--json", "--exclude", "sub")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert sorted(os.path.basename(p) for p in summary["indexed"]) == ["cafe.txt", "handbook.docx", "report.pdf"]
    reasons = {os.path.basename(s["path"]): s["reason"] for s in summary["skipped"]}
    assert reasons["empty.md"] == "empty file" and reasons["broken.pdf"].startswith("corrupt PDF")
    assert summary["stats"]["documents_inserted"] == 3
    again = _cli("index", str(root), "-w", str(wd), "--offline", "--exclude", "sub", "--max-file-size", "0.0001")
    assert again.returncode == 0, again.stderr
    assert "0 new, 0 updated, 1 unchanged" in again.stdout  # only the small text file is under the limit
    assert "MiB size limit" in again.stderr and "report.pdf" in again.stderr
