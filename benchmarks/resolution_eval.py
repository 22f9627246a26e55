"""Entity resolution benchmark (run by hand, not a test).

``quality``: pairwise precision and recall of the merges against hand-made labels
(``benchmarks/resolution_labels/*.json``: ``groups`` of names that denote one thing, every other
name its own thing; ``apart``: look-alike pairs that must stay apart, each with its kind, whose
merges are listed as violations). Each label set names its corpus and extractor: A Christmas
Carol through the offline extractor, through the mock LLM server, and through answers a model
wrote for each of its chunks (``model:<file>`` in ``benchmarks/model_answers/``, replayed by the
mock server), and a sample of HotpotQA passages through the offline extractor. A corpus shipped
in the repo (``set:<name>``, ``benchmarks/resolution_corpora/<name>.json``) is split by document
into a dev and a test half, each indexed and scored alone; such a corpus has a label file per
extraction path, ``<set>_model.json`` for the model's answers and ``<set>_nlp.json`` for the
offline extractor's own names (``extraction="nlp"``), each scored on its own (a name listed under
``ambiguous``, one string given to two things, is in no group, so any merge of it counts wrong).
Every run reports the resolution stage's CPU and its share of the insert's; a summary table
pools the split sets per extractor and half. ``compare`` sets two saved runs (``--save``) side
by side, with the merges each has that the other has not.

``scale``: the HotpotQA passages (or a corpus from ``make_corpus.py``) indexed in steps,
with and without resolution: entities, distinct names, merges, model calls, the resolution
stage's share of the insert's wall time and CPU, and the CPU of its lookup process (a large
write with LLM extraction looks its names up in a second process, which ``process_time``
does not see), with the share counting it.

    python benchmarks/resolution_eval.py quality [--names] [--labels TEXT[,TEXT]] [--half dev|test]
        [--extractor model|nlp] [--untyped] [--repeat N] [--save RUN.json]
    python benchmarks/resolution_eval.py compare BEFORE.json AFTER.json
    python benchmarks/resolution_eval.py scale [--corpus PATH] [--steps 250,500,1000] [--extractor nlp|mock]
        [--only-on]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
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
SETS = os.path.join(HERE, "resolution_corpora")


def corpus(name: str) -> list[str]:
    if name == "christmas_carol":
        with open(os.path.join(DATA, "christmas_carol.txt"), encoding="utf-8") as f:
            return [f.read()]
    if name.startswith("hotpotqa:"):
        start, stop = (int(x) for x in name.split(":")[1].split("-"))
        return hotpotqa_passages(os.path.join(DATA, "hotpotqa", "corpus.json"))[start:stop]
    raise ValueError(name)


def corpus_halves(name: str) -> dict[str, list[str]]:
    """Documents by half: a shipped set (``set:<name>``) is split by document into ``dev`` and
    ``test``, so rules are chosen on one half and reported on the other; any other corpus is one
    half, ``all``."""
    if not name.startswith("set:"):
        return {"all": corpus(name)}
    with open(os.path.join(SETS, name[len("set:"):] + ".json"), encoding="utf-8") as f:
        documents = json.load(f)["documents"]
    halves: dict[str, list[str]] = {}
    for doc in documents:
        halves.setdefault(doc["half"], []).append(doc["text"])
    return halves


def embedding(name: str) -> Any:
    """``hash``: bag-of-words vectors (engine overhead only); ``local``: the bundled model."""
    return hash_embedding(64) if name == "hash" else local_embedding()


def embedding_blocking(args: argparse.Namespace) -> dict[str, Any]:
    """The setting only when asked for, so this script also runs against versions without it."""
    return {} if args.embedding is None else {"entity_resolution_embedding_threshold": args.embedding}


_ENTITY_TYPE = re.compile(r'(\("entity"<\|>"[^"]*"<\|>)"[^"]*"')


def replaying(answers: dict[str, str], untyped: bool = False) -> Any:
    """A responder giving each chunk's extraction the answer a model wrote for it (by chunk id),
    no gleanings, and the mock's answers to every other prompt. A chunk with no written answer
    is warned of: its chunking differs from the one the answers were written for. ``untyped``:
    every entity's type blanked, as from an extraction asked for no types."""
    if untyped:
        answers = {k: _ENTITY_TYPE.sub(r'\1""', v) for k, v in answers.items()}

    def respond(req: dict) -> str:
        found = prompt_of(req)
        kind = PROMPT_KINDS.get(found[0]) if found else None
        if kind == "extraction":
            chunk_id = chunk_id_for(found[1]["input_text"].strip())
            if chunk_id not in answers:
                print(f"no model answer for {chunk_id}", file=sys.stderr)
            return answers.get(chunk_id, COMPLETE)
        if kind == "gleaning_continue":
            return COMPLETE
        if kind == "gleaning_check":
            return "NO"
        return realistic_responder(req)

    return respond


def build(docs: list[str], extractor: str, working_dir: str, server: Any = None, embedder: str = "hash",
          untyped: bool = False, **config: Any) -> tuple[GraphRAG, dict]:
    settings: dict[str, Any] = dict(working_dir=working_dir, extraction="nlp", embedding_func=embedding(embedder),
                                    show_progress=False, **config)
    if extractor == "mock" or extractor.startswith("model:"):
        settings.update(extraction="llm", llm_base_url=server.base_url, llm_api_key="k")
    server_responder = getattr(server, "responder", None)
    if extractor.startswith("model:"):
        with open(os.path.join(HERE, "model_answers", extractor[len("model:"):]), encoding="utf-8") as f:
            server.responder = replaying(json.load(f)["answers"], untyped)
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


def pairwise(names: list[str], predicted: dict[str, str], groups: list[list[str]],
             apart: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """Precision and recall over all pairs of ``names``: a pair is merged when both map to
    one node, and truly one thing when one labelled group holds both. ``apart`` pairs (look-alikes
    that must stay apart) that were merged are listed as violations, with their kind."""
    truth = {n: i for i, g in enumerate(groups) for n in g}
    present = set(names)
    merged = {(a, b) for a, b in combinations(sorted(present), 2) if predicted.get(a, a) == predicted.get(b, b)}
    same = {(a, b) for g in groups for a, b in combinations(sorted(set(g) & present), 2)}
    hits = merged & same
    checked = [p for p in apart if set(p["names"]) <= present]
    violations = [[*p["names"], p["kind"]] for p in checked
                  if predicted.get(p["names"][0], p["names"][0]) == predicted.get(p["names"][1], p["names"][1])]
    return {"names": len(present), "labelled_names": len(present & (set(truth) | {n for p in apart for n in p["names"]})),
            "true_pairs": len(same), "merged_pairs": len(merged), "correct": len(hits),
            "precision": round(len(hits) / len(merged), 3) if merged else 1.0,
            "recall": round(len(hits) / len(same), 3) if same else 1.0,
            "apart_checked": len(checked), "apart_violations": violations,
            "wrong": sorted(merged - same)[:int(os.environ.get("RES_SHOW", 40))], "missed": sorted(same - merged)[:int(os.environ.get("RES_SHOW", 80))]}


def quality(args: argparse.Namespace) -> None:
    rows = []
    clock = ResolveClock()
    with MockLLMServer() as server:
        warm_up(server, args)
        for path in sorted(os.listdir(LABELS)):
            if args.labels and not any(part in path for part in args.labels.split(",")):
                continue
            with open(os.path.join(LABELS, path), encoding="utf-8") as f:
                label = json.load(f)
            extractor = label["extractor"]
            if args.extractor and (extractor == "nlp") != (args.extractor == "nlp"):
                continue
            for half, docs in corpus_halves(label["corpus"]).items():
                if args.half and half not in (args.half, "all"):
                    continue
                rows.append(score(label, path, extractor, half, docs, server, clock, args))
    summary(rows)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            json.dump(rows, f, ensure_ascii=False, indent=1)


def compare(args: argparse.Namespace) -> None:
    """Two saved ``quality`` runs (before, after) side by side per set, extractor and half,
    with the wrong merges and the apart violations each run has that the other has not."""
    runs = []
    for path in (args.before, args.after):
        with open(path, encoding="utf-8") as f:
            runs.append({(r["labels"], r["extractor"], r["half"]): r for r in json.load(f)})
    before, after = runs
    print("| set | extractor | half | true pairs | before P / R | after P / R | apart merged before / after |\n"
          "|---|---|---|---:|---:|---:|---:|")
    for key in sorted(before.keys() & after.keys()):
        b, a = before[key], after[key]
        print(f"| {key[0].rsplit('.', 1)[0]} | {extractor_path(key[1])} | {key[2]} | {a['true_pairs']} | {b['precision']:.3f} / "
              f"{b['recall']:.3f} | {a['precision']:.3f} / {a['recall']:.3f} | "
              f"{len(b['apart_violations'])} / {len(a['apart_violations'])} |")
    for key in sorted(before.keys() & after.keys()):
        b, a = before[key], after[key]
        for what in ("wrong", "missed", "apart_violations"):
            gone = [x for x in b[what] if x not in a[what]]
            new = [x for x in a[what] if x not in b[what]]
            if gone or new:
                print(f"{key[0].rsplit('.', 1)[0]} {extractor_path(key[1])} {key[2]} {what}: no longer {gone}; now {new}")


def warm_up(server: Any, args: argparse.Namespace) -> None:
    """One small insert down each path first, so the first scored run's CPU holds no one-time
    costs (imports, the tokenizer, the embedder, the server's first connection)."""
    for extractor in ("nlp", "mock"):
        with tempfile.TemporaryDirectory() as wd:
            build(["Ada Lovelace met Charles Babbage in London. Lovelace wrote notes on his engine."], extractor, wd,
                  server, args.embedder)


def score(label: dict, path: str, extractor: str, half: str, docs: list[str], server: Any, clock: "ResolveClock",
          args: argparse.Namespace) -> dict[str, Any]:
    """Index ``docs`` with ``extractor`` in a fresh working dir and score its merges on ``label``.
    With ``--repeat N`` the index is built N times and the CPU seconds summed: these inserts take
    a tenth of a second, so one run's share moves by points with the machine's load."""
    cpu = resolve_cpu = 0.0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as wd:
            clock.take()
            started = time.process_time()
            rag, stats = build(docs, extractor, wd, server, args.embedder, args.untyped,
                               entity_resolution_llm_check=args.llm_check, **embedding_blocking(args))
            cpu += time.process_time() - started
            resolve_cpu += clock.take()
            record = resolution_record(rag)
    cpu, resolve_cpu = round(cpu, 3), round(resolve_cpu, 3)
    if args.names:
        print("\n".join(sorted(record["names"])))
    result = pairwise(record["names"], record["aliases"], label["groups"], label.get("apart", []))
    row = {"labels": path, "extractor": extractor, "half": half, "documents": len(docs), **result,
           "resolution": stats.get("entity_resolution"), "insert_cpu": cpu, "resolve_cpu": resolve_cpu,
           "resolve_cpu_share": round(resolve_cpu / cpu, 3) if cpu else 0.0,
           "resolve_seconds": stats["stage_seconds"].get("resolve", 0.0),
           "llm_resolution_calls": stats["llm"].get("resolution", {}).get("calls", 0)}
    print(json.dumps(row, indent=1, ensure_ascii=False), flush=True)
    return row


def extractor_path(extractor: str) -> str:
    """``model``, ``mock`` or ``nlp``: a label set's extractor without its answers file."""
    return extractor.split(":")[0]


def summary(rows: list[dict[str, Any]]) -> None:
    """One line per run, then each split set's halves pooled and the split sets pooled per
    extractor path and half (pairs summed, so a large set weighs more)."""
    def line(name: str, extractor: str, half: str, group: list[dict[str, Any]]) -> str:
        merged, correct, true = (sum(r[k] for r in group) for k in ("merged_pairs", "correct", "true_pairs"))
        cpu, resolve = sum(r["insert_cpu"] for r in group), sum(r["resolve_cpu"] for r in group)
        violations = sum(len(r["apart_violations"]) for r in group)
        checked = sum(r["apart_checked"] for r in group)
        precision = f"{correct / merged:.3f}" if merged else "1.000"
        recall = f"{correct / true:.3f}" if true else "-"
        share = f"{resolve / cpu:.1%}" if cpu else "-"
        return (f"| {name} | {extractor} | {half} | {sum(r['names'] for r in group)} | {true} | {merged} | "
                f"{precision} | {recall} | {violations} / {checked} | {share} |")

    print("\n| set | extractor | half | names | true pairs | merged pairs | precision | recall "
          "| apart merged / checked | resolve CPU share |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(line(r["labels"].rsplit(".", 1)[0], extractor_path(r["extractor"]), r["half"], [r]))
    split = [r for r in rows if r["half"] != "all"]
    halves = sorted({r["half"] for r in split})
    both = ["dev+test"] if len(halves) > 1 else []  # pooled halves, when both were run
    for (name, extractor) in sorted({(r["labels"], r["extractor"]) for r in split}) if both else ():
        print(line(name.rsplit(".", 1)[0], extractor_path(extractor), "dev+test",
                   [r for r in split if (r["labels"], r["extractor"]) == (name, extractor)]))
    for extractor in sorted({extractor_path(r["extractor"]) for r in split}):
        for half in halves + both:
            group = [r for r in split if extractor_path(r["extractor"]) == extractor and half in (r["half"], "dev+test")]
            print(line("**all split sets**", extractor, half, group))


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


def children_cpu() -> float:
    """CPU seconds of this process's ended children: in ``scale``, resolution's lookup process
    (the mock server runs in a thread of this process)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


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
                started, cpu, children = time.perf_counter(), time.process_time(), children_cpu()
                stats = rag.insert(batch)
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                resolve_cpu, lookup_cpu = clock.take(), round(children_cpu() - children, 3)
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
                             # The lookup process's CPU (resolution's, in another process): the
                             # stage's share with it counted in both the stage and the insert.
                             "lookup_cpu": lookup_cpu,
                             "resolve_cpu_share_with_lookups": round((resolve_cpu + lookup_cpu) / (cpu + lookup_cpu), 3)
                             if cpu else 0.0,
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
    q.add_argument("--labels", help="only the label files whose name holds one of these comma-separated texts")
    q.add_argument("--llm-check", action="store_true", help="ask the (mock) model about ambiguous pairs")
    q.add_argument("--untyped", action="store_true",
                   help="blank the entity types of model-written answers (an extraction asked for no types)")
    q.add_argument("--half", choices=("dev", "test"), help="only this half of the split sets")
    q.add_argument("--repeat", type=int, default=1, help="build each index this many times, CPU summed")
    q.add_argument("--save", help="write every run's row to this JSON file (for compare)")
    q.add_argument("--extractor", choices=("model", "nlp"),
                   help="model: only the LLM paths (model answers, mock); nlp: only the offline extractor")
    q.set_defaults(func=quality)
    c = sub.add_parser("compare")
    c.add_argument("before", help="a JSON file written by quality --save")
    c.add_argument("after", help="another, to compare with the first")
    c.set_defaults(func=compare)
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
