"""Builds the working dirs in this folder with the engine as it was before the architecture
rework (commit 8015dd9), so tests can check that today's code opens and answers them unchanged.

Run with that version importable (e.g. ``pip install --no-deps --target DIR`` of that commit,
then ``PYTHONPATH=DIR python tests/data/compat/build_v0_1_dirs.py`` from outside the repo).
Writes ``nlp/`` (LLM-free extraction), ``llm/`` (extraction, summaries and reports by the
mock LLM server) and ``expected.json`` (each dir's document list and query contexts).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "pipeline"
QUESTIONS = {"local": "Who runs the harbour and what does the guild do?",
             "global": "What are the main themes of the town's life?",
             "naive": "When is the lantern festival held?"}


def build(kind: str) -> dict:
    from graphrag import GraphRAG, QueryParam
    from graphrag.embedding import hash_embedding

    target = HERE / kind
    shutil.rmtree(target, ignore_errors=True)
    kwargs = dict(working_dir=str(target), embedding_func=hash_embedding(32), chunk_token_size=120,
                  chunk_overlap_token_size=12, show_progress=False)
    docs = sorted(CORPUS.glob("*.txt"))
    texts, sources = [p.read_text() for p in docs], [p.name for p in docs]
    if kind == "nlp":
        GraphRAG(extraction="nlp", **kwargs).insert(texts, sources)
        rag = GraphRAG(extraction="nlp", **kwargs)
    else:
        from graphrag.testing.mock_llm_server import MockLLMServer, realistic_responder

        with MockLLMServer(responder=realistic_responder) as server:
            GraphRAG(llm_base_url=server.base_url, llm_api_key="k", entity_summary_to_max_tokens=40,
                     **kwargs).insert(texts, sources)
        rag = GraphRAG(**kwargs)
    contexts = {mode: rag.query(question, QueryParam(mode=mode, only_need_context=True))
                for mode, question in QUESTIONS.items()}
    for leftover in target.glob(".graphrag.lock"):
        leftover.unlink()
    return {"documents": sorted(rag.list_documents(), key=lambda d: d["id"]), "contexts": contexts}


if __name__ == "__main__":
    if Path.cwd() == HERE.parents[2]:
        sys.exit("run from outside the repository, so the old version on PYTHONPATH is imported")
    os.environ.pop("OPENAI_API_KEY", None)
    os.environ.pop("OPENAI_BASE_URL", None)
    expected = {"questions": QUESTIONS, **{kind: build(kind) for kind in ("nlp", "llm")}}
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
