"""Readers' throughput and the memory of indexing one big PDF (issue 24).

    python benchmarks/readers_bench.py            # 200 mixed files, then a 50 MB PDF

Part 1 writes 200 generated files of seven kinds (PDF, .docx, HTML, Markdown, text,
Latin-1 text, JSONL) and times reading them (``graphrag.file_insert.read_files``: walk,
read, decode, positions), apart from extraction; then the whole offline insert
(``extraction="nlp"``, hash embeddings) for comparison. Part 2 writes a 50 MB PDF (300 text
pages, each with an image, as reports with figures are) and indexes it offline in a fresh
process, reporting its peak RSS against the same process before indexing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers_files import write_docx, write_html, write_jsonl, write_pdf  # noqa: E402

WORDS = ("lantern glass furnace harbour guild market silver ship river bridge tower mill forge "
         "orchard bakery archive ledger council winter summer").split()
NAMES = ["Ada Pennick", "Bram Ostrow", "Corin Vale", "Mila Dorn", "Zoe Lamarque", "Ferrin Shipping",
         "Quillhaven", "Tidewater Market", "Harbour Guild", "Ostmark"]


def sentence(i: int) -> str:
    a, b = NAMES[i % len(NAMES)], NAMES[(i * 7 + 3) % len(NAMES)]
    words = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9))
    return f"{a} met {b} near the {words} (entry {i})."


def paragraph(seed: int, n: int) -> str:
    return " ".join(sentence(seed + k) for k in range(n))


def make_mixed_folder(root: Path, count: int = 200) -> Counter:
    kinds = ["pdf", "docx", "html", "md", "txt", "latin1", "jsonl"]
    made: Counter = Counter()
    for i in range(count):
        kind = kinds[i % len(kinds)]
        size = 4 + (i * 13) % 40  # paragraphs: a few KB to ~50 KB of text
        if kind == "pdf":
            pages = [[sentence(i * 100 + p * 10 + k) for k in range(30)] for p in range(max(1, size // 4))]
            write_pdf(root / f"report_{i}.pdf", pages, title=f"Report {i}")
        elif kind == "docx":
            write_docx(root / f"handbook_{i}.docx", f"Handbook {i}",
                       [(f"Section {s}", [paragraph(i * 50 + s * 5, 5)]) for s in range(size // 2)])
        elif kind == "html":
            write_html(root / f"page_{i}.html", f"Page {i}", f"Heading {i}",
                       [paragraph(i * 40 + k, 4) for k in range(size)])
        elif kind == "md":
            (root / f"notes_{i}.md").write_text(
                f"# Notes {i}\n\n" + "\n\n".join(f"## Part {k}\n\n{paragraph(i * 30 + k, 4)}" for k in range(size)))
        elif kind == "txt":
            (root / f"log_{i}.txt").write_text("\n\n".join(paragraph(i * 20 + k, 4) for k in range(size)))
        elif kind == "latin1":
            text = "\n\n".join(paragraph(i * 20 + k, 4).replace("Zoe", "Zoé") for k in range(size))
            (root / f"cafe_{i}.txt").write_bytes(("Café Rouge. " + text).encode("latin-1"))
        else:
            write_jsonl(root / f"records_{i}.jsonl",
                        [{"id": f"r{k}", "title": f"Record {k}", "text": paragraph(i * 60 + k, 3)} for k in range(size)])
        made[kind] += 1
    return made


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def bench_mixed() -> dict:
    from graphrag import GraphRAG, hash_embedding
    from graphrag.file_insert import read_files

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "docs"
        root.mkdir()
        made = make_mixed_folder(root)
        size = folder_bytes(root)
        read_files([str(root)], show_progress=False)  # warm: imports pypdf, docx, charset_normalizer
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            read = read_files([str(root)], show_progress=False)
            runs.append(time.perf_counter() - started)
        seconds = min(runs)
        per_kind: dict = {}
        for kind, pattern in (("pdf", "*.pdf"), ("docx", "*.docx"), ("html", "*.html"), ("md", "*.md"),
                              ("txt", "*.txt"), ("jsonl", "*.jsonl")):
            files = sorted(str(p) for p in root.glob(pattern))
            started = time.perf_counter()
            read_files(files, show_progress=False)
            took = time.perf_counter() - started
            mb = sum(os.path.getsize(f) for f in files) / 1e6
            per_kind[kind] = {"files": len(files), "MB": round(mb, 2), "files_per_s": round(len(files) / took, 1),
                              "MB_per_s": round(mb / took, 2)}
        rag = GraphRAG(working_dir=str(Path(tmp) / "wd"), extraction="nlp", embedding_func=hash_embedding(384),
                       show_progress=False)
        started = time.perf_counter()
        report = rag.insert_files(str(root))
        insert_s = time.perf_counter() - started
        return {
            "files": sum(made.values()), "kinds": dict(made), "MB": round(size / 1e6, 2),
            "documents": len(read.all_documents()), "text_MB": round(sum(len(t) for t in read.texts()) / 1e6, 2),
            "read_s": round(seconds, 3), "files_per_s": round(sum(made.values()) / seconds, 1),
            "MB_per_s": round(size / 1e6 / seconds, 2), "per_kind": per_kind,
            "offline_insert_s": round(insert_s, 2), "indexed": len(report.indexed), "skipped": len(report.skipped),
            "chunks": report.stats["chunks_inserted"], "stage_seconds": report.stats["stage_seconds"],
        }


BIG_PDF_CHILD = """
import json, sys, time
from graphrag import GraphRAG, hash_embedding
from graphrag.file_insert import read_files
import pypdf, docx  # imported before the baseline, as the readers would

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(field + ":"))

rag = GraphRAG(working_dir=sys.argv[2], extraction="nlp", embedding_func=hash_embedding(384), show_progress=False)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM): a forked child starts with its parent's
base = status("VmRSS")
started = time.perf_counter()
if sys.argv[3] == "read":
    read = read_files([sys.argv[1]], show_progress=False)
    out = {"text_chars": sum(len(t) for t in read.texts())}
else:
    report = rag.insert_files(sys.argv[1])
    out = {"chunks": report.stats["chunks_inserted"], "stage_seconds": report.stats["stage_seconds"]}
out.update(seconds=round(time.perf_counter() - started, 2), baseline_rss_MB=round(base, 1),
           peak_rss_MB=round(status("VmHWM"), 1))
print(json.dumps(out))
"""


def bench_big_pdf(target_mb: int = 50, pages: int = 300) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.pdf"
        image = target_mb * 10**6 // pages
        write_pdf(path, [[sentence(p * 40 + k) for k in range(40)] for p in range(pages)], title="Big", image_bytes=image)
        result = {"MB": round(path.stat().st_size / 1e6, 1), "pages": pages}
        for what in ("read", "index"):
            proc = subprocess.run([sys.executable, "-c", BIG_PDF_CHILD, str(path), str(Path(tmp) / f"wd_{what}"), what],
                                  capture_output=True, text=True, check=True)
            result[what] = json.loads(proc.stdout)
        return result


if __name__ == "__main__":
    print(json.dumps({"mixed_folder": bench_mixed(), "pdf_50mb": bench_big_pdf()}, indent=2))
