"""CPU of two insert stages replayed over a kept index: extraction parsing and community reports.

    python benchmarks/insert_memory.py CORPUS --keep DIR      # once, to have an index
    python benchmarks/stage_cpu.py DIR [--rounds N]

The whole insert's CPU moves by a second between runs on a shared machine; these replays move
by a few hundredths, so a change to either stage can be measured against its base.

- ``parse``: ``read_extraction_answer`` over every model answer in the LLM cache that holds
  records (the answers the insert parsed).
- ``reports``: ``generate_community_reports`` over the dir's graph and communities, every
  report written afresh, with a model that answers at once with a stored report, and a new
  tokenizer each round (its count cache empty, as in an insert).

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
import tempfile
import time
from typing import Any


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


def reports_cpu(working_dir: str, rounds: int) -> tuple[float, str]:
    from graphrag import GraphRAG
    from graphrag.embedding import hash_embedding
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
    rag = GraphRAG(working_dir=working_dir, embedding_func=hash_embedding(384), show_progress=False)

    async def one_round() -> tuple[float, dict]:
        tokenizer = TiktokenTokenizer("gpt-4o")
        start = time.process_time()
        records, _ = await generate_community_reports(communities, graph=rag.stores.graph, llm=model,
                                                      tokenizer=tokenizer, max_tokens=12000, existing={})
        return time.process_time() - start, records

    _, records = asyncio.run(one_round())  # the first also reads the graph
    digest = hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()[:16]
    return min(asyncio.run(one_round())[0] for _ in range(rounds)), digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("working_dir", help="a dir written by insert_memory.py --keep (it is copied, not changed)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with open(os.path.join(args.working_dir, "kv_store_llm_response_cache.json")) as f:
        cache = json.load(f)
    answers = [v["return"] for v in cache.values() if isinstance(v, dict) and isinstance(v.get("return"), str)
               and "<|>" in v["return"]]
    copy = tempfile.mkdtemp(prefix="stage_cpu_")
    try:
        shutil.copytree(args.working_dir, copy, dirs_exist_ok=True)
        parse_s, parse_digest = parse_cpu(answers, args.rounds)
        reports_s, reports_digest = reports_cpu(copy, args.rounds)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    print(json.dumps({"answers": len(answers), "parse_cpu_s": round(parse_s, 3), "parse_digest": parse_digest,
                      "communities_cpu_s": round(reports_s, 3), "reports_digest": reports_digest}))


if __name__ == "__main__":
    main()
