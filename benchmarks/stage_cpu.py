"""CPU of two insert stages replayed over a kept index: extraction parsing and community reports.

    python benchmarks/insert_memory.py CORPUS --keep DIR      # once, to have an index
    python benchmarks/stage_cpu.py DIR [--rounds N]

The whole insert's CPU moves by a second between runs on a shared machine; these replays move
by a few hundredths, so a change to either stage can be measured against its base.

- ``parse``: ``read_extraction_answer`` over every model answer in the LLM cache that holds
  records (the answers the insert parsed).
- ``reports``: ``generate_community_reports`` over the dir's graph and communities, every
  report written afresh, with a model that answers at once with a stored report, and a new
  tokenizer each round (its count cache empty, as in an insert); ``--small-components N``
  reports whole components of at most N entities from their records, as an insert does;
  ``--mock`` sends the calls through the engine's LLM client to the mock server at 0 ms
  instead (the digest then is of the mock's reports).

Prints one JSON record: the least CPU seconds of each over the rounds, and a digest of what
each produced (the same digest before and after a change: the same records, the same reports).
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import start_server  # noqa: E402


def parse_cpu(answers: list[str], rounds: int) -> tuple[float, str]:
    from graphrag.operators.extraction import read_extraction_answer

    digest = hashlib.sha256(repr([read_extraction_answer(a) for a in answers]).encode()).hexdigest()[:16]
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for answer in answers:
            read_extraction_answer(answer)
        best = min(best, time.process_time() - start)
    return best, digest


def reports_cpu(working_dir: str, rounds: int, small_components: int = 0,
                base_url: Optional[str] = None) -> tuple[float, str]:
    from graphrag import GraphRAG
    from graphrag.embedding import hash_embedding
    from graphrag.llm import LLMClient, UsageCounter, openai_model_func
    from graphrag.operators.community_reports import generate_community_reports
    from graphrag.operators.tokenizer import TiktokenTokenizer

    with open(os.path.join(working_dir, "kv_store_community_reports.json")) as f:
        stored = json.load(f)
    report_keys = ("report_json", "report_string", "fingerprint", "report_source")
    communities = {cid: {k: v for k, v in rec.items() if k not in report_keys} for cid, rec in stored.items()}
    answers = [json.dumps(rec["report_json"]) for rec in stored.values()]

    async def model(prompt: str, **_: Any) -> str:
        return answers[int(hashlib.md5(prompt.encode()).hexdigest(), 16) % len(answers)]

    model.max_async = 16  # type: ignore[attr-defined]
    if base_url:  # the insert's own client over HTTP, uncached
        model = LLMClient(openai_model_func("gpt-4o-mini", base_url=base_url, api_key="k"),  # type: ignore[assignment]
                          model_id="gpt-4o-mini", max_async=16, usage=UsageCounter())
    rag = GraphRAG(working_dir=working_dir, embedding_func=hash_embedding(384), show_progress=False)

    async def one_round() -> tuple[float, dict]:
        tokenizer = TiktokenTokenizer("gpt-4o")
        start = time.process_time()
        records, _ = await generate_community_reports(communities, graph=rag.stores.graph, llm=model,
                                                      tokenizer=tokenizer, max_tokens=12000, existing={},
                                                      small_component_max_entities=small_components)
        return time.process_time() - start, records

    _, records = asyncio.run(one_round())  # the first also reads the graph
    digest = hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()[:16]
    return min(asyncio.run(one_round())[0] for _ in range(rounds)), digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("working_dir", help="a dir written by insert_memory.py --keep (it is copied, not changed)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mock", action="store_true",
                    help="reports through the engine's LLM client and the mock server at 0 ms (this "
                         "process's CPU: the engine and its client side), instead of a model in process")
    ap.add_argument("--small-components", type=int, default=0, metavar="N",
                    help="report whole components of at most N entities from their records (the "
                         "small_component_max_entities option); 0: every community goes to the model")
    args = ap.parse_args()
    with open(os.path.join(args.working_dir, "kv_store_llm_response_cache.json")) as f:
        cache = json.load(f)
    answers = [v["return"] for v in cache.values() if isinstance(v, dict) and isinstance(v.get("return"), str)
               and "<|>" in v["return"]]
    copy = tempfile.mkdtemp(prefix="stage_cpu_")
    try:
        shutil.copytree(args.working_dir, copy, dirs_exist_ok=True)
        parse_s, parse_digest = parse_cpu(answers, args.rounds)
        server, base_url = start_server(0.0) if args.mock else (None, None)
        try:
            reports_s, reports_digest = reports_cpu(copy, args.rounds, args.small_components, base_url)
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=10)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    print(json.dumps({"answers": len(answers), "parse_cpu_s": round(parse_s, 3), "parse_digest": parse_digest,
                      "communities_cpu_s": round(reports_s, 3), "reports_digest": reports_digest}))


if __name__ == "__main__":
    main()
