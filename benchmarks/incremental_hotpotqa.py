"""Incremental maintenance benchmark (run by hand, not a test).

Indexes the HotpotQA passages with the mock LLM server, then adds one short new
document and deletes it again, printing what each step cost: LLM calls by stage
(as the server saw them and as the engine counted them), reports regenerated and
wall time. A good incremental engine pays for the new document's chunks and the few
communities it changed, not for the whole corpus.

    python benchmarks/incremental_hotpotqa.py [--corpus PATH] [--limit N] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from graphrag import GraphRAG, hash_embedding

# The mock server is test support, not part of the installed package: import it from the checkout.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from mock_llm_server import MockLLMServer  # noqa: E402

DEFAULT_CORPUS = "/work/shared/data/hotpotqa/corpus.json"

# Mentions two entities the corpus already has (from its "Demon Dice" passage) and
# a few it does not: the change should stay inside one or two communities.
NEW_DOCUMENT = (
    "Lester Smith later praised Tim Brown for the artwork of a new card game, Ember Hollow. "
    "Ember Hollow was published by Quillmark Press in Ashbury."
)


# Touches hubs of the largest connected component (thousands of entities): hierarchical
# Leiden re-runs on that whole component, which is where churn shows if there is any.
HUB_DOCUMENT = (
    "Ember Hollow, a card game from Quillmark Press, launched in London. "
    "Quillmark Press also sells it in New York."
)


def load_corpus(path: str, limit: int | None) -> tuple[list[str], list[str]]:
    """HotpotQA's ``{title: [sentence, ...]}``, or the JSON list of documents make_corpus.py
    writes (each named by its first line) -> (documents, sources)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, list):
        docs = data[: limit or None]
        return docs, [d.split("\n", 1)[0] for d in docs]
    docs, sources = [], []
    for title, sentences in data.items():
        body = "".join(sentences) if isinstance(sentences, list) else str(sentences)
        docs.append(f"{title}\n{body.strip()}")
        sources.append(title)
        if limit and len(docs) >= limit:
            break
    return docs, sources


def step(server: MockLLMServer, name: str, fn: Any) -> dict[str, Any]:
    server.reset()
    started = time.perf_counter()
    stats = fn()
    wall = time.perf_counter() - started
    engine = stats.get("llm", {})
    return {
        "step": name,
        "wall_s": round(wall, 2),
        "server_calls_by_kind": dict(sorted(Counter(server.calls_by_kind).items())),
        "server_chat_calls": sum(server.calls_by_kind.values()),
        "engine_llm_by_stage": {s: {"calls": u.get("calls", 0), "cached": u.get("cached", 0)}
                                for s, u in engine.items()},
        **{k: stats[k] for k in ("documents_inserted", "documents_removed", "chunks_inserted", "chunks_removed",
                                  "entities_changed", "communities", "reports_generated") if k in stats},
        "stage_seconds": {k: round(v, 2) for k, v in (stats.get("stage_seconds") or {}).items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--limit", type=int, default=None, help="index only the first N passages")
    ap.add_argument("--keep", default=None, help="working dir to use and keep (default: a temp dir, removed)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    docs, sources = load_corpus(args.corpus, args.limit)
    workdir = args.keep or tempfile.mkdtemp(prefix="incremental_hotpotqa_")
    results: dict[str, Any] = {"passages": len(docs), "working_dir": workdir}
    server = MockLLMServer(latency=0).start()
    try:
        rag = GraphRAG(working_dir=workdir, embedding_func=hash_embedding(384), llm_base_url=server.base_url,
                       llm_api_key="k", best_model_max_async=32, cheap_model_max_async=32, show_progress=False)
        results["initial_index"] = step(server, "initial_index", lambda: rag.insert(docs, sources=sources))
        reports_before = _reports(rag)

        for label, text in (("", NEW_DOCUMENT), ("_touching_largest_component", HUB_DOCUMENT)):
            source = f"new-document{label}.txt"
            add, delete = f"add_one_document{label}", f"delete_that_document{label}"
            results[add] = step(server, add, lambda: rag.insert(text, sources=[source]))
            reports_after = _reports(rag)
            results[add]["communities_changed"] = _changed(reports_before, reports_after)
            results[add]["component_sizes_touched"] = _touched_components(rag, source)

            new_id = next(d["id"] for d in rag.list_documents() if d["source"] == source)
            results[delete] = step(server, delete, lambda: rag.delete_documents(new_id))
            reports_final = _reports(rag)
            results[delete]["communities_changed"] = _changed(reports_after, reports_final)
            results[delete]["reports_equal_to_before_add"] = (
                {k: v["fingerprint"] for k, v in reports_final.items()}
                == {k: v["fingerprint"] for k, v in reports_before.items()})
            reports_before = reports_final
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


def _reports(rag: GraphRAG) -> dict[str, dict[str, Any]]:
    path = os.path.join(rag.config.working_dir, "kv_store_community_reports.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _touched_components(rag: GraphRAG, source: str) -> list[int]:
    """Sizes of the graph components holding the entities the new document mentions."""
    import networkx as nx

    from graphrag.schema import GRAPH_FIELD_SEP

    wd = rag.config.working_dir
    with open(os.path.join(wd, "kv_store_full_docs.json"), encoding="utf-8") as fh:
        docs = json.load(fh)
    chunk_ids = {c for d in docs.values() if d.get("source") == source for c in d.get("chunk_ids", [])}
    graph = nx.read_graphml(os.path.join(wd, "graph_chunk_entity_relation.graphml"))
    return sorted(
        (len(component) for component in nx.connected_components(graph)
         if any(chunk_ids & set(str(graph.nodes[n].get("source_id", "")).split(GRAPH_FIELD_SEP)) for n in component)),
        reverse=True,
    )


def _changed(before: dict[str, dict], after: dict[str, dict]) -> dict[str, int]:
    """How the set of (community id, fingerprint) pairs moved between two states."""
    fb = {k: v.get("fingerprint") for k, v in before.items()}
    fa = {k: v.get("fingerprint") for k, v in after.items()}
    return {
        "kept": sum(1 for k in fa if fb.get(k) == fa[k]),
        "content_changed": sum(1 for k in fa if k in fb and fb[k] != fa[k]),
        "added": sum(1 for k in fa if k not in fb),
        "removed": sum(1 for k in fb if k not in fa),
    }


if __name__ == "__main__":
    raise SystemExit(main())
