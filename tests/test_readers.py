"""Readers: each file type's text, title and positions; bad files refused with a reason;
positions mapped onto chunks; citations."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from graphrag.errors import ConfigurationError, InvalidInputError, MissingExtraError, UnreadableFileError
from graphrag.operators.chunking import chunk_by_separators, chunk_by_tokens
from graphrag.operators.positions import chunk_spans, citation, cited_content, locate_chunks, span_positions
from graphrag.readers import Mark, ReadOptions, known_suffixes, read_file
from graphrag.records import Chunk
from helpers_files import write_docx, write_encrypted_pdf, write_html, write_jsonl, write_pdf

PAGE_1 = ["Ada Pennick blew lanterns in Quillhaven.", "Her furnace burned (day and night)."]
PAGE_2 = ["Bram Ostrow sold the lanterns at the harbour market."]


def test_every_format_has_a_reader() -> None:
    for suffix in (".pdf", ".docx", ".html", ".htm", ".md", ".txt", ".json", ".jsonl"):
        assert suffix in known_suffixes()


def test_pdf_text_per_page_with_page_marks(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "report.pdf", [PAGE_1, PAGE_2], title="Lantern Report")
    [doc] = read_file(str(path))
    assert doc.title == "Lantern Report" and doc.source == str(path)
    page_2_at = doc.text.index(PAGE_2[0])
    assert doc.marks == [Mark(0, page=1), Mark(page_2_at, page=2)]
    assert doc.text[:page_2_at].strip() == "\n".join(PAGE_1)


@pytest.mark.parametrize("make, reason", [
    (lambda p: write_encrypted_pdf(p, [PAGE_1]), "encrypted PDF"),
    (lambda p: write_pdf(p, [[], []], image_bytes=400), r"no text layer in its 2 page\(s\) \(scanned or image-only"),
    (lambda p: p.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> trunc"), "corrupt PDF"),
])
def test_unreadable_pdfs_are_refused_with_the_reason(tmp_path: Path, make, reason: str) -> None:
    path = tmp_path / "bad.pdf"
    make(path)
    with pytest.raises(UnreadableFileError, match=reason) as err:
        read_file(str(path))
    assert isinstance(err.value, InvalidInputError)


def test_docx_paragraphs_and_heading_trail(tmp_path: Path) -> None:
    path = write_docx(tmp_path / "handbook.docx", "Workshop Handbook",
                      [("Safety", ["Wear goggles near the furnace."]), ("Tools", ["Use the long blowpipe."])],
                      [("Ladders", ["Check the ladders every morning."])])
    [doc] = read_file(str(path))
    assert doc.title == "Workshop Handbook"
    assert "Wear goggles near the furnace." in doc.text and "Check the ladders every morning." in doc.text
    by_heading = {m.heading: m.offset for m in doc.marks}
    assert list(by_heading) == ["Safety", "Tools", "Tools > Ladders"]
    assert doc.text[by_heading["Safety"]:].startswith("Safety\n\nWear goggles")


def test_corrupt_docx_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "broken.docx"
    path.write_bytes(b"PK\x03\x04 this is not a zip archive")
    with pytest.raises(UnreadableFileError, match="corrupt .docx"):
        read_file(str(path))


def test_html_main_text_without_navigation_scripts_and_styles(tmp_path: Path) -> None:
    path = write_html(tmp_path / "page.html", "Lantern Works", "Our lanterns",
                      ["Ada Pennick blew every lantern.", "Bram Ostrow sold them &amp; more."])
    [doc] = read_file(str(path))
    assert doc.title == "Lantern Works"
    assert doc.text == "Our lanterns\n\nAda Pennick blew every lantern.\n\nBram Ostrow sold them & more."
    for furniture in ("Home", "Shop menu", "banner", "analytics", "color", "Copyright"):
        assert furniture not in doc.text
    assert doc.marks == [Mark(0, heading="Our lanterns")]


def test_html_without_main_keeps_body_text_but_not_nav(tmp_path: Path) -> None:
    path = tmp_path / "plain.htm"
    path.write_text("<html><body><nav>Menu</nav><h2>Notes</h2><p>First.<br>Second.</p>"
                    "<div role='navigation'>Skip</div></body></html>", encoding="utf-8")
    [doc] = read_file(str(path))
    assert doc.text == "Notes\n\nFirst.\n\nSecond." and doc.title == "Notes"  # no <title>: the first heading


def test_markdown_keeps_headings_and_ignores_code_fences(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("# Glass Guide\n\nIntro.\n\n## Cutting\n\nScore once.\n```\n# not a heading\n```\n"
                    "## Polishing\nUse felt.\n", encoding="utf-8")
    [doc] = read_file(str(path))
    assert doc.title == "Glass Guide"
    assert "## Cutting" in doc.text and "# not a heading" in doc.text
    assert [m.heading for m in doc.marks] == ["Glass Guide", "Glass Guide > Cutting", "Glass Guide > Polishing"]
    assert doc.text[doc.marks[2].offset:].startswith("## Polishing")


def test_jsonl_one_document_per_record_with_configured_fields(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "notes.jsonl", [
        {"id": "n1", "name": "Furnace note", "body": "The furnace was relit in March."},
        {"name": "No id", "body": "Bram sold forty lanterns."},
        {"name": "No text here"},
    ])
    docs = read_file(str(path), ReadOptions(text_field="body", title_field="name"))
    assert [(d.text, d.title, d.source) for d in docs] == [
        ("The furnace was relit in March.", "Furnace note", f"{path}#n1"),
        ("Bram sold forty lanterns.", "No id", f"{path}#2"),
    ]
    with pytest.raises(UnreadableFileError, match="no record with a 'text' text field"):
        read_file(str(path))


def test_json_array_of_records(tmp_path: Path) -> None:
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{"title": "A", "text": "Alpha."}, {"title": "B", "text": "Beta."}]))
    assert [d.title for d in read_file(str(path))] == ["A", "B"]


def test_latin1_text_is_detected_and_decoded(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("Café Rouge, owned by Zoé Lamarque, à côté de la forêt.".encode("latin-1"))
    [doc] = read_file(str(path))
    assert doc.text == "Café Rouge, owned by Zoé Lamarque, à côté de la forêt." and doc.title == "latin1"


@pytest.mark.parametrize("content, reason", [
    (b"", "empty file"), (b"  \n\t\n", "no text in it"), (b"\x00\x01\x02" * 50, "binary file"),
])
def test_empty_blank_and_binary_files_are_refused(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(content)
    with pytest.raises(UnreadableFileError, match=reason):
        read_file(str(path))


def test_size_limit_and_unknown_types(tmp_path: Path) -> None:
    big = tmp_path / "huge.log"
    big.write_text("line of a log\n" * 1000)
    with pytest.raises(UnreadableFileError, match="over the 0 MiB size limit"):
        read_file(str(big), ReadOptions(max_file_bytes=1000))
    odd = tmp_path / "notes.xyz"
    odd.write_text("plain words")
    with pytest.raises(UnreadableFileError, match="no reader for .xyz"):
        read_file(str(odd))
    assert read_file(str(odd), as_text=True)[0].text == "plain words"


def test_a_missing_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pdf(tmp_path / "r.pdf", [PAGE_1])
    monkeypatch.setitem(sys.modules, "pypdf", None)  # what an environment without the package gives
    with pytest.raises(MissingExtraError, match=r"pip install 'filegraphrag\[files\]'") as err:
        read_file(str(path))
    assert isinstance(err.value, ConfigurationError)


# --------------------------------------------------------------------------- positions


def test_chunk_spans_follow_overlapping_windows() -> None:
    text = "one two three four five six seven"
    assert chunk_spans(text, ["one two three", "three four five", "five six seven", "absent"]) == [
        (0, 13), (8, 23), (19, 33), None]


def test_span_positions_cover_pages_and_headings() -> None:
    marks = [[0, 1, None], [100, 2, None], [250, 3, None]]
    assert span_positions(marks, 10, 90) == {"pages": [1, 1]}
    assert span_positions(marks, 90, 260) == {"pages": [1, 3]}
    assert span_positions(marks, 100, 250) == {"pages": [2, 2]}  # ends just before page 3 starts
    headed = [[0, None, "A"], [50, None, "A > B"]]
    assert span_positions(headed, 40, 60) == {"headings": ["A", "A > B"]}


@pytest.mark.parametrize("chunker", [chunk_by_tokens, chunk_by_separators])
def test_every_chunk_gets_the_pages_its_text_is_on(chunker) -> None:
    pages = [" ".join(f"Page {p} sentence {i} about glass." for i in range(40)) for p in (1, 2, 3)]
    text = "\n\n".join(pages)
    starts = [text.index(p) for p in pages]
    marks = [[s, n, None] for n, s in enumerate(starts, start=1)]
    chunks = chunker({"doc-1": text}, size=60, overlap=10)
    located = locate_chunks(chunks, {"doc-1": {"content": text, "source": "/x/report.pdf", "title": "R",
                                               "marks": marks}})
    for record in located.values():
        first, last = record["pages"]
        found = {int(n) for n in __import__("re").findall(r"Page (\d)", record["content"])}
        assert found and min(found) == first and max(found) == last
        assert record["source"] == "/x/report.pdf" and record["title"] == "R"


def test_chunks_of_plain_documents_are_left_as_they_were() -> None:
    chunks = chunk_by_tokens({"doc-1": "Just text."}, size=50, overlap=5)
    assert locate_chunks(chunks, {"doc-1": {"content": "Just text."}}) == chunks


def test_citations() -> None:
    assert citation({"source": "/a/report.pdf", "pages": [12, 13]}) == "report.pdf p. 12-13"
    assert citation({"source": "/a/report.pdf", "pages": [4, 4]}) == "report.pdf p. 4"
    assert citation({"source": "/a/handbook.docx", "headings": ["Safety"]}) == "handbook.docx, section Safety"
    assert citation({"source": "/a/notes.jsonl#7"}) == "notes.jsonl#7"
    assert citation({"content": "old chunk"}) is None
    assert cited_content({"content": "old chunk"}) == "old chunk"
    assert cited_content({"content": "x", "source": "/r.pdf", "pages": [2, 2]}) == "[r.pdf p. 2] x"
    chunk = Chunk.from_stored("c", {"content": "x", "full_doc_id": "d", "source": "/r.pdf", "pages": [1, 2]})
    assert chunk.pages == (1, 2) and chunk.citation == "r.pdf p. 1-2"
    assert Chunk.from_stored("c", {"content": "x", "full_doc_id": "d"}).citation is None


# ---------------------------------------------------------------- decompression bombs and limits


def test_a_flate_bomb_pdf_is_refused_within_its_limits() -> None:
    """Ten pages share one Flate stream of text operators: 16 KB on disk, seconds per page to
    read. Refused by the page count at once, and by the clock or the memory limit mid-page
    (only a separate process can stop pypdf mid-page)."""
    import time

    from graphrag.readers import read_data
    from graphrag.readers.worker import GRACE_SECONDS
    from helpers_files import flate_bomb_pdf

    bomb = flate_bomb_pdf(pages=10, stream_bytes=4 << 20)
    assert len(bomb) < 32 * 1024
    cases = [(ReadOptions(max_pages=5), "over the limit of 5 pages", 1.0),
             (ReadOptions(max_seconds=1), "over the limit of 1 s", 1 + GRACE_SECONDS + 0.5),
             (ReadOptions(max_memory_bytes=100 << 20), "over the limit of 100 MiB of memory", 10.0)]
    for options, reason, seconds in cases:
        started = time.monotonic()
        with pytest.raises(UnreadableFileError, match=reason):
            read_data("bomb.pdf", bomb, options)
        assert time.monotonic() - started < seconds, reason
    # The worker goes on reading after a file it had to stop.
    [doc] = read_data("after.txt", b"Ada Pennick blew lanterns.")
    assert doc.text == "Ada Pennick blew lanterns."


def test_a_zip_bomb_docx_is_refused_before_it_unpacks() -> None:
    """A 200 KB .docx whose body unpacks to 45 MB: refused from the sizes its zip declares,
    in well under a second and without unpacking anything."""
    import time
    import tracemalloc

    from graphrag.readers import read_data
    from helpers_files import zip_bomb_docx

    bomb = zip_bomb_docx(text_bytes=45 << 20)
    assert len(bomb) < 512 * 1024
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(UnreadableFileError, match="word/document.xml unpacks to .* a decompression bomb"):
            read_data("bomb.docx", bomb)
        elapsed, (_, peak) = time.monotonic() - started, tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0 and peak < 8 * len(bomb)


@pytest.mark.parametrize("name, nested", [
    ("deep.json", b'{"text": "x", "more": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
    ("deep.jsonl", b'{"text": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"),
])
def test_structures_nested_past_the_parser_are_refused_with_a_reason(name: str, nested: bytes) -> None:
    """JSON nested deeper than the parser recurses is an unreadable file (400 from the server,
    skipped by graphrag index), not a crash."""
    from graphrag.readers import read_data

    with pytest.raises(UnreadableFileError, match="nested deeper than the reader can follow"):
        read_data(name, nested)


def test_text_over_the_character_limit_is_refused(tmp_path: Path) -> None:
    path = write_docx(tmp_path / "long.docx", "Lanterns", [("Glass", PAGE_1 * 20)])
    with pytest.raises(UnreadableFileError, match="over the limit of 500 characters"):
        read_file(str(path), ReadOptions(max_chars=500))
    assert read_file(str(path), ReadOptions(max_chars=5000))[0].text.count("Ada Pennick") == 20


def test_graphrag_index_skips_a_bomb_with_its_reason(tmp_path: Path) -> None:
    import os
    import subprocess

    from helpers_files import zip_bomb_docx

    root = tmp_path / "docs"
    root.mkdir()
    (root / "bomb.docx").write_bytes(zip_bomb_docx(text_bytes=45 << 20))
    (root / "lanterns.txt").write_text(" ".join(PAGE_1), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "graphrag.cli", "index", str(root), "-w", str(tmp_path / "wd"),
                           "--offline"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GRAPHRAG_EMBEDDING": "hash"})
    assert done.returncode == 0, done.stderr
    assert f"skipped {root / 'bomb.docx'}: word/document.xml unpacks to" in done.stderr
    assert "1 new" in done.stdout
