"""Index the example history with no LLM and no network, then ask it two questions.

    python examples/quickstart_offline.py

Extraction is ``extraction="nlp"`` (proper nouns and sentence co-occurrence, no model),
embeddings come from the bundled all-MiniLM-L6-v2 model, and everything is written to
``example_cache/`` at the repository root. Run it again and the unchanged text costs
nothing; delete that folder to start over. With no LLM configured, a query returns the
context an LLM would have been given, under a one-line note.
"""
from __future__ import annotations

import csv
import io
import re
import sys
import time
from pathlib import Path

from graphrag import GraphRAG, QueryParam

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "saltmarsh_lantern_works.md"
WORKING_DIR = HERE.parent / "example_cache"


def clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def summarize_context(text: str, rows: int = 3, width: int = 110) -> str:
    """A few rows of each ``-----Section-----`` CSV table of a retrieved context."""
    out = []
    parts = re.split(r"^-----(.+?)-----$", text, flags=re.M)
    if parts[0].strip():  # the one-line "no LLM configured" note
        out.append(" ".join(parts[0].split()))
    for title, body in zip(parts[1::2], parts[2::2]):
        table = body.strip().removeprefix("```csv").removesuffix("```").strip()
        records = list(csv.reader(io.StringIO(table)))
        if len(records) < 2:
            continue
        header, records = records[0], records[1:]
        out.append(f"{title} ({len(records)} rows; columns: {', '.join(header)})")
        for record in records[:rows]:
            out.append("  - " + clip(" | ".join(record[1:]), width))
    return "\n".join(out)


def main() -> None:
    started = time.perf_counter()
    rag = GraphRAG(
        working_dir=str(WORKING_DIR),
        extraction="nlp",  # no LLM anywhere: extraction and community reports are rule-based
            # The embedding model reads 256 word pieces; chunks of ~150 tokens fit its window.
        chunk_token_size=150,
        chunk_overlap_token_size=30,
    )
    stats = rag.insert(DATA.read_text(encoding="utf-8"), sources=[str(DATA.relative_to(HERE.parent))])
    graph = rag.stores.graph.graph
    reports = rag.stores.community_reports
    print(f"Indexed {DATA.name} into {WORKING_DIR} in {stats['seconds']:.1f}s "
          f"({stats['documents_inserted']} new document(s), {stats['documents_already_indexed']} already indexed)")
    print(f"Graph: {graph.number_of_nodes()} entities, {graph.number_of_edges()} relations, "
          f"{len(reports)} communities")
    top = sorted(graph.degree, key=lambda nd: (-nd[1], nd[0]))[:6]
    print("Most connected: " + ", ".join(f"{name} ({degree})" for name, degree in top))

    questions = [
        ("local", "Who was Tobias Wren and what did he do for Ada Pennick?"),
        ("global", "What are the main conflicts and turning points in the history of Quillhaven?"),
    ]
    for mode, question in questions:
        param = QueryParam(mode=mode, top_k=10, local_max_token_for_text_unit=600,
                           local_max_token_for_local_context=1200, local_max_token_for_community_report=600,
                           global_max_token_for_community_report=2000)
        answer = rag.query(question, param)
        print(f"\n=== {mode} query: {question}\n")
        print(summarize_context(answer))
    print(f"\nDone in {time.perf_counter() - started:.1f}s. Next: `graphrag stats --working-dir {WORKING_DIR}`, "
          "or open examples/explore_cache.ipynb.")


if __name__ == "__main__":
    sys.exit(main())
