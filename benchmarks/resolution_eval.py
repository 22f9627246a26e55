"""Entity resolution benchmark (run by hand, not a test).

``quality``: pairwise precision and recall of the merges against hand-made labels
(``benchmarks/resolution_labels/*.json``: groups of names that denote one thing; every other
name is its own thing). Each label set names its corpus and extractor: A Christmas Carol
through the offline extractor, through the mock LLM server, and through answers a model wrote
for each of its chunks (``model:<file>`` in ``benchmarks/model_answers/``, replayed by the mock
server), and a sample of HotpotQA passages through the offline extractor.

``scale``: the HotpotQA passages (or a corpus from ``make_corpus.py``) indexed in steps,
with and without resolution: entities, distinct names, merges, model calls and the
resolution stage's share of the insert's wall time.

    python benchmarks/resolution_eval.py quality [--names] [--labels TEXT]
    python benchmarks/resolution_eval.py scale [--corpus PATH] [--steps 250,500,1000] [--extractor nlp|mock]
        [--only-on]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from itertools import combinations
from typing import Any

from graphrag import GraphRAG, hash_embedding, local_embedding
from graphrag.indexing.pipeline import Pipeline
from graphrag.operators.resolution import joined_state

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, HERE)
from make_corpus import hotpotqa_passages  # noqa: E402
from mock_llm_server import COMPLETE, MockLLMServer, prompt_of, realistic_responder  # noqa: E402
from graphrag.operators.chunking import chunk_id_for  # noqa: E402
from graphrag.prompts import PROMPT_KINDS  # noqa: E402

DATA = os.environ.get("GRAPHRAG_SHARED_DATA", "/work/shared/data")
LABELS = os.path.join(HERE, "resolution_labels")


def corpus(name: str) -> list[str]:
    if name == "christmas_carol":
        with open(os.path.join(DATA, "christmas_carol.txt"), encoding="utf-8") as f:
            return [f.read()]
    if name.startswith("hotpotqa:"):
        start, stop = (int(x) for x in name.split(":")[1].split("-"))
        return hotpotqa_passages(os.path.join(DATA, "hotpotqa", "corpus.json"))[start:stop]
    raise ValueError(name)


def embedding(name: str) -> Any:
    """``hash``: bag-of-words vectors (engine overhead only); ``local``: the bundled model."""
    return hash_embedding(64) if name == "hash" else local_embedding()


def embedding_blocking(args: argparse.Namespace) -> dict[str, Any]:
    """The setting only when asked for, so this script also runs against versions without it."""
    return {} if args.embedding is None else {"entity_resolution_embedding_threshold": args.embedding}


def replaying(answers: dict[str, str]) -> Any:
    """A responder giving each chunk's extraction the answer a model wrote for it (by chunk id),
    no gleanings, and the mock's answers to every other prompt."""
    def respond(req: dict) -> str:
        found = prompt_of(req)
        kind = PROMPT_KINDS.get(found[0]) if found else None
        if kind == "extraction":
            return answers.get(chunk_id_for(found[1]["input_text"].strip()), COMPLETE)
        if kind == "gleaning_continue":
            return COMPLETE
        if kind == "gleaning_check":
            return "NO"
        return realistic_responder(req)

    return respond


def build(docs: list[str], extractor: str, working_dir: str, server: Any = None, embedder: str = "hash",
          **config: Any) -> tuple[GraphRAG, dict]:
    settings: dict[str, Any] = dict(working_dir=working_dir, extraction="nlp", embedding_func=embedding(embedder),
                                    show_progress=False, **config)
    if extractor == "mock" or extractor.startswith("model:"):
        settings.update(extraction="llm", llm_base_url=server.base_url, llm_api_key="k")
    server_responder = getattr(server, "responder", None)
    if extractor.startswith("model:"):
        with open(os.path.join(HERE, "model_answers", extractor[len("model:"):]), encoding="utf-8") as f:
            server.responder = replaying(json.load(f)["answers"])
    try:
        rag = GraphRAG(**settings)
        stats = rag.insert(docs)
    finally:
        if server is not None:
            server.responder = server_responder
    return rag, stats


def resolution_record(rag: GraphRAG) -> dict[str, Any]:
    with open(os.path.join(rag.config.working_dir, "kv_store_index_meta.json"), encoding="utf-8") as f:
        return joined_state(json.load(f)) or {"names": [], "aliases": {}}


def pairwise(names: list[str], predicted: dict[str, str], groups: list[list[str]]) -> dict[str, Any]:
    """Precision and recall over all pairs of ``names``: a pair is merged when both map to
    one node, and truly one thing when one labelled group holds both."""
    truth = {n: i for i, g in enumerate(groups) for n in g}
    present = set(names)
    merged = {(a, b) for a, b in combinations(sorted(present), 2) if predicted.get(a, a) == predicted.get(b, b)}
    same = {(a, b) for g in groups for a, b in combinations(sorted(set(g) & present), 2)}
    hits = merged & same
    return {"names": len(present), "true_pairs": len(same), "merged_pairs": len(merged), "correct": len(hits),
            "precision": round(len(hits) / len(merged), 3) if merged else 1.0,
            "recall": round(len(hits) / len(same), 3) if same else 1.0,
            "wrong": sorted(merged - same)[:int(os.environ.get("RES_SHOW", 40))], "missed": sorted(same - merged)[:int(os.environ.get("RES_SHOW", 80))]}


def quality(args: argparse.Namespace) -> None:
    with MockLLMServer() as server:
        for path in sorted(os.listdir(LABELS)):
            if args.labels and args.labels not in path:
                continue
            with open(os.path.join(LABELS, path), encoding="utf-8") as f:
                label = json.load(f)
            with tempfile.TemporaryDirectory() as wd:
                started = time.process_time()
                rag, stats = build(corpus(label["corpus"]), label["extractor"], wd, server, args.embedder,
                                   entity_resolution_llm_check=args.llm_check, **embedding_blocking(args))
                cpu = round(time.process_time() - started, 2)
                record = resolution_record(rag)
            if args.names:
                print("\n".join(sorted(record["names"])))
            result = pairwise(record["names"], record["aliases"], label["groups"])
            print(json.dumps({"labels": path, **result, "resolution": stats.get("entity_resolution"),
                              "insert_cpu": cpu, "resolve_seconds": stats["stage_seconds"].get("resolve", 0.0),
                              "llm_resolution_calls": stats["llm"].get("resolution", {}).get("calls", 0)}, indent=1))


class ResolveClock:
    """CPU seconds of the resolution stage (``Pipeline.resolve``: the pass and the rebuild of
    the moved names), next to the stage's wall time the insert reports."""

    def __init__(self) -> None:
        self.cpu = 0.0
        original = Pipeline.resolve

        async def timed(write: Pipeline, *args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return await original(write, *args, **kwargs)
            finally:
                self.cpu += time.process_time() - started

        Pipeline.resolve = timed  # type: ignore[method-assign]

    def take(self) -> float:
        cpu, self.cpu = self.cpu, 0.0
        return round(cpu, 3)


def scale(args: argparse.Namespace) -> None:
    if args.corpus:
        with open(args.corpus, encoding="utf-8") as f:
            docs = json.load(f)
    else:
        docs = hotpotqa_passages(os.path.join(DATA, "hotpotqa", "corpus.json"))
    steps = [int(s) for s in args.steps.split(",")]
    rows = []
    clock = ResolveClock()
    server = MockLLMServer().start() if args.extractor == "mock" else None
    for resolution in (True,) if args.only_on else (False, True):
        with tempfile.TemporaryDirectory() as wd:
            settings: dict[str, Any] = dict(working_dir=wd, extraction="nlp", embedding_func=embedding(args.embedder),
                                            show_progress=False, entity_resolution=resolution,
                                            **embedding_blocking(args))
            if server is not None:
                settings.update(extraction="llm", llm_base_url=server.base_url, llm_api_key="k",
                                entity_resolution_llm_check=args.llm_check)
            rag = GraphRAG(**settings)
            done = 0
            for step in steps:
                batch = docs[done:step]
                started, cpu = time.perf_counter(), time.process_time()
                stats = rag.insert(batch)
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                resolve_cpu = clock.take()
                done = step
                with open(os.path.join(wd, "graph_chunk_entity_relation.graphml"), encoding="utf-8") as f:
                    entities = f.read().count("<node ")
                record = resolution_record(rag) if resolution else {}
                rows.append({"extractor": args.extractor, "resolution": resolution,
                             "documents": min(step, len(docs)), "entities": entities,
                             "names": len(record.get("names", [])), "aliases": len(record.get("aliases", {})),
                             "insert_seconds": round(wall, 2),
                             "resolve_seconds": stats["stage_seconds"].get("resolve", 0.0),
                             "resolve_share": round(stats["stage_seconds"].get("resolve", 0.0) / wall, 3),
                             "insert_cpu": round(cpu, 2), "resolve_cpu": resolve_cpu,
                             "resolve_cpu_share": round(resolve_cpu / cpu, 3) if cpu else 0.0,
                             "llm_calls": sum(v.get("calls", 0) for v in stats["llm"].values()),
                             "resolution_llm_calls": stats["llm"].get("resolution", {}).get("calls", 0)})
                print(json.dumps(rows[-1]), flush=True)
    if server is not None:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--names", action="store_true", help="print every name (for labelling)")
    q.add_argument("--labels", help="only the label files whose name holds this text")
    q.add_argument("--llm-check", action="store_true", help="ask the (mock) model about ambiguous pairs")
    q.set_defaults(func=quality)
    s = sub.add_parser("scale")
    s.add_argument("--corpus", help="a JSON list of passages (default: the HotpotQA passages)")
    s.add_argument("--steps", default="250,500,1000")
    s.add_argument("--extractor", choices=("nlp", "mock"), default="nlp",
                   help="the offline extractor, or LLM extraction through the mock server (0 ms latency)")
    s.add_argument("--llm-check", action="store_true", help="ask the mock model about ambiguous pairs")
    s.add_argument("--only-on", action="store_true", help="skip the run with resolution off")
    s.set_defaults(func=scale)
    for parser in (q, s):
        parser.add_argument("--embedding", type=float, default=None,
                            help="embedding blocking at this cosine (entity_resolution_embedding_threshold)")
        parser.add_argument("--embedder", choices=("hash", "local"), default="hash",
                            help="hash: bag-of-words vectors; local: the bundled embedding model")
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
