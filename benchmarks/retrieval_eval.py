"""Retrieval evaluation: does each query mode's context hold the passages a question needs?

    python benchmarks/retrieval_eval.py --corpus CORPUS --questions QUESTIONS
        [--extraction nlp,llm] [--modes naive,local,hybrid] [--working-dir DIR] [--limit N]
        [--reuse-index] [--split dev|test|all] [--lexical on|off|both] [--ablation]
        [--param FIELD=JSON ...]

Indexes the corpus (once per extraction; ``llm`` goes through the mock LLM server of
``tests/``), asks every question in every mode with ``only_need_context=True``, reads the
passages of each context in the order they appear (naive: its chunks; local and hybrid:
their Sources table), matches them to the corpus by their text and reports, per extraction
and mode, Recall@2, Recall@5 and recall anywhere in the context (percent, averaged over
questions), with the index time and the p50 query time. Global mode's context holds
community reports, not passages, so it is not measured here.

``--variants`` asks hybrid again under other values of the constants of
``operators/query_hybrid.py`` or ``operators/walk_graph.py``, for ablations and tuning: ``"plain:FACT_SEED_SHARE=0;facts:FACT_SEED_SHARE=0.3"``
reports ``hybrid[plain]`` and ``hybrid[facts]``. (Set from here, so the library keeps no study hook.)
A flag takes 0 or 1: ``"old:ABSENT_AT_END=0"`` is the plain fusion hybrid shipped before issue 35's round 5.
``--ablation`` adds the variants of :data:`PIECES`: none of them, each alone, all together.

``--param named_headings_first=false`` sets a ``QueryParam`` field for every question.

``--reuse-index`` asks the questions of an index a previous run kept in ``--working-dir``
(no indexing). ``--split`` scores the even-numbered questions (``dev``, the ones to tune
on), the odd-numbered ones (``test``, held out) or ``all``; the default prints all three.

Formats read:
* HotpotQA: corpus ``{title: [sentences]}``; questions carry ``supporting_facts`` ``[[title, i], ...]``.
* MuSiQue / 2Wiki style: corpus ``[{"title", "text"}]``; questions carry ``paragraphs``
  ``[{"title", "paragraph_text" or "text", "is_supporting"}]``. Without ``--corpus`` the corpus
  is every question's paragraphs.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
MODES_WITH_PASSAGES = ("naive", "local", "hybrid")
NAIVE_CHUNK_SEPARATOR = "\n--New Chunk--\n"  # operators/query_naive.CHUNK_SEPARATOR
_HAN = re.compile(r"[\u3400-\u9fff]")  # an entity name in Chinese script holds a Han character
_SOURCES = re.compile(r"-----Sources-----\n```csv\n(.*?)\n```", re.S)


@dataclass
class Question:
    text: str
    gold: set[str]  # titles of the supporting passages


SPLITS = ("dev", "test", "all")


def in_split(position: int, split: str) -> bool:
    """Even-numbered questions are ``dev`` (tune on them), odd-numbered ones ``test``."""
    return split == "all" or (position % 2 == 0) == (split == "dev")


# --------------------------------------------------------------------------- data


def passage_document(title: str, text: str) -> str:
    """How a passage is indexed: its title on the first line (as benchmarks/bench.py does)."""
    return f"{title}\n{text}"


def _paragraph_text(p: dict) -> str:
    return p.get("paragraph_text") or p.get("text") or ""


def load_qa(corpus_path: Optional[str], questions_path: str) -> tuple[dict[str, str], list[Question]]:
    """``({title: text}, questions)`` from either supported format."""
    with open(questions_path, encoding="utf-8") as f:
        raw_questions = json.load(f)
    passages: dict[str, str] = {}
    if corpus_path:
        with open(corpus_path, encoding="utf-8") as f:
            corpus = json.load(f)
        if isinstance(corpus, dict):
            passages = {t: "".join(s) if isinstance(s, list) else str(s) for t, s in corpus.items()}
        else:
            passages = {p["title"]: _paragraph_text(p) for p in corpus}
    questions = []
    for q in raw_questions:
        if "supporting_facts" in q:
            gold = {title for title, *_ in q["supporting_facts"]}
        else:
            gold = {p["title"] for p in q.get("paragraphs", []) if p.get("is_supporting")}
            if not corpus_path:
                for p in q.get("paragraphs", []):
                    passages.setdefault(p["title"], _paragraph_text(p))
        questions.append(Question(q["question"], gold))
    return passages, questions


# --------------------------------------------------------------------------- reading a context


def context_passages(mode: str, context: str) -> list[str]:
    """The passage texts of a context, in the order they appear."""
    if mode == "naive":
        return [t for t in context.split(NAIVE_CHUNK_SEPARATOR) if t.strip()]
    match = _SOURCES.search(context)
    if not match:
        return []
    rows = list(csv.reader(io.StringIO(match.group(1))))
    return [row[1] for row in rows[1:] if len(row) > 1]


class PassageMatcher:
    """Finds which corpus passage a context passage is, by its text (a chunk of a longer
    passage matches the passage that contains it)."""

    def __init__(self, passages: dict[str, str]) -> None:
        self._documents = {title: passage_document(title, text).strip() for title, text in passages.items()}
        self._exact = {doc: title for title, doc in self._documents.items()}

    def title(self, text: str) -> Optional[str]:
        text = text.strip()
        found = self._exact.get(text)
        if found is not None:
            return found
        probe = text[:200]
        for title, doc in self._documents.items():
            if probe and probe in doc:
                return title
        return None


def ranked_titles(texts: Iterable[str], matcher: PassageMatcher) -> list[str]:
    """Matched titles in context order, each once."""
    return list(dict.fromkeys(t for t in (matcher.title(x) for x in texts) if t is not None))


def recall(ranked: Sequence[str], gold: set[str], k: Optional[int] = None) -> float:
    """Share of the gold passages among the first ``k`` ranked ones (all of them if None)."""
    if not gold:
        return 0.0
    top = ranked if k is None else ranked[:k]
    return len(gold.intersection(top)) / len(gold)


def score(per_question: list[tuple[list[str], set[str]]]) -> dict[str, float]:
    """Recall@2, Recall@5 and recall anywhere, in percent, averaged over questions."""
    n = max(len(per_question), 1)
    return {name: round(100 * sum(recall(r, g, k) for r, g in per_question) / n, 1)
            for name, k in (("recall@2", 2), ("recall@5", 5), ("anywhere", None))}


# --------------------------------------------------------------------------- running


def _cpu_seconds() -> float:
    usage = os.times()
    return usage.user + usage.system


def build_index(working_dir: str, documents: list[str], extraction: str, base_url: Optional[str],
                embedding_func: Any, lexical: bool = True, **config: Any) -> dict[str, Any]:
    from graphrag import GraphRAG

    options: dict[str, Any] = {"extraction": extraction, "show_progress": False, "lexical_retrieval": lexical,
                               **config}
    if base_url:
        options.update(llm_base_url=base_url, llm_api_key="k", best_model_max_async=16,
                       cheap_model_max_async=16, llm_max_async_total=16)
    rag = GraphRAG(working_dir=working_dir, embedding_func=embedding_func, **options)
    cpu, wall = _cpu_seconds(), time.perf_counter()
    rag.insert(documents)
    return {"index_wall_s": round(time.perf_counter() - wall, 1), "index_cpu_s": round(_cpu_seconds() - cpu, 1),
            "stage_seconds": (rag.last_insert_stats or {}).get("stage_seconds", {})}


def parse_variants(text: str) -> dict[str, dict[str, float]]:
    """``"name:CONST=value,CONST=value;name2:..."`` as ``{name: {CONST: value}}``."""
    variants: dict[str, dict[str, float]] = {}
    for part in (p for p in text.split(";") if p.strip()):
        name, _, settings = part.partition(":")
        variants[name.strip()] = {k.strip(): float(v) for k, v in (s.split("=") for s in settings.split(",") if s)}
    return variants


# The pieces issue 35 added to the hybrid ranking, each as the constants that switch it on;
# ``--ablation`` asks hybrid with none of them, each alone and all together. (Facts only act
# on an index built with relation vectors, ``--relation-vectors``.)
PIECES: dict[str, dict[str, float]] = {
    "facts": {"FACT_SEED_SHARE": 0.05},
    "synonyms": {"SYNONYM_MIN_COSINE": 0.8},
}


def ablation_variants() -> dict[str, dict[str, float]]:
    """``none`` (every piece off), each piece alone, and ``all`` of them."""
    off = {name: 0.0 for constants in PIECES.values() for name in constants}
    off["SYNONYM_MIN_COSINE"] = None  # type: ignore[assignment]  # None: no synonym links
    variants = {"none": dict(off)}
    for piece, constants in PIECES.items():
        variants[piece] = {**off, **constants}
    variants["all"] = {**off, **{k: v for constants in PIECES.values() for k, v in constants.items()}}
    return variants


def mode_runs(modes: Sequence[str], variants: dict[str, dict[str, float]]) -> list[tuple[str, str, dict[str, float]]]:
    """``(label, mode, constants)`` for each mode, then hybrid under each variant."""
    return [(m, m, {}) for m in modes] + [(f"hybrid[{n}]", "hybrid", c) for n, c in variants.items()]


async def ask_all(rag: Any, questions: list[Question], modes: Sequence[str], matcher: PassageMatcher,
                  splits: Sequence[str] = ("all",),
                  variants: Optional[dict[str, dict[str, float]]] = None,
                  query_options: Optional[dict[str, Any]] = None) -> dict[str, dict[str, Any]]:
    """Per mode (and hybrid variant): the scores of each split (``{split: {"recall@2": ...}}``)
    and the p50 times; ``query_options``: further ``QueryParam`` fields for every question."""
    from graphrag.operators import query_hybrid, walk_graph

    results: dict[str, dict[str, Any]] = {}
    for label, mode, constants in mode_runs(modes, variants or {}):
        owners = {name: query_hybrid if hasattr(query_hybrid, name) else walk_graph for name in constants}
        saved = {name: getattr(owners[name], name) for name in constants}
        for name, value in constants.items():
            setattr(owners[name], name, value if value is None or saved[name] is None else type(saved[name])(value))
        try:
            results[label] = await _ask_mode(rag, questions, mode, matcher, splits, query_options or {})
        finally:
            for name, value in saved.items():
                setattr(owners[name], name, value)
    return results


async def _ask_mode(rag: Any, questions: list[Question], mode: str, matcher: PassageMatcher,
                    splits: Sequence[str], query_options: dict[str, Any]) -> dict[str, Any]:
    from graphrag import QueryParam

    per_question: list[tuple[list[str], set[str]]] = []
    seconds, cpu_seconds = [], []
    for q in questions:
        started, cpu = time.perf_counter(), time.process_time()
        context = await rag.aquery(q.text, QueryParam(mode=mode, only_need_context=True, **query_options))
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.process_time() - cpu)
        per_question.append((ranked_titles(context_passages(mode, context), matcher), q.gold))
    # The first query of a mode builds what later ones reuse (the hybrid walk's graph): the
    # median is the steady state; both wall and CPU time, as the machine may be shared.
    return {**{split: score([r for i, r in enumerate(per_question) if in_split(i, split)]) for split in splits},
            "p50_query_ms": round(1000 * statistics.median(seconds), 1),
            "p50_query_cpu_ms": round(1000 * statistics.median(cpu_seconds), 1)}


def evaluate(passages: dict[str, str], questions: list[Question], extraction: str, modes: Sequence[str],
             working_dir: str, base_url: Optional[str] = None, embedding_func: Any = None,
             reuse_index: bool = False, splits: Sequence[str] = ("all",), lexical: bool = True,
             variants: Optional[dict[str, dict[str, float]]] = None,
             query_options: Optional[dict[str, Any]] = None, **config: Any) -> dict[str, Any]:
    """Index ``passages`` into ``working_dir`` (the bundled model embeds unless
    ``embedding_func`` is given; ``reuse_index``: the index already there) and score every
    mode's contexts on each of ``splits``; ``lexical``: the lexical channel on or off;
    ``query_options``: further ``QueryParam`` fields; ``config``: further ``GraphRAG`` options."""
    from graphrag import GraphRAG
    from graphrag.embedding import local_embedding

    embedding_func = embedding_func or local_embedding()
    built: dict[str, Any] = {"reused_index": True}
    if not reuse_index:
        documents = [passage_document(t, x) for t, x in passages.items()]
        built = build_index(working_dir, documents, extraction, base_url, embedding_func, lexical, **config)
    rag = GraphRAG(working_dir=working_dir, embedding_func=embedding_func, extraction=extraction,
                   show_progress=False, lexical_retrieval=lexical, **config)
    modes_results = asyncio.run(ask_all(rag, questions, modes, PassageMatcher(passages), splits, variants,
                                       query_options))
    names = [entity.name for entity in rag.knowledge_graph.whole().entities]
    return {"extraction": extraction, "lexical": lexical, "passages": len(passages), "questions": len(questions), **built,
            "entities": len(names), "entities_in_han_script": sum(bool(_HAN.search(n)) for n in names),
            "modes": modes_results}


def markdown_table(records: list[dict[str, Any]]) -> str:
    lines = ["| extraction | lexical | mode | split | Recall@2 | Recall@5 | anywhere in context | p50 query ms (CPU) |",
             "|---|---|---|---|---|---|---|---|"]
    for record in records:
        for mode, r in record["modes"].items():
            for split in (s for s in SPLITS if s in r):
                lines.append(f"| {record['extraction']} | {'on' if record.get('lexical', True) else 'off'} "
                             f"| {mode} | {split} | {r[split]['recall@2']} | "
                             f"{r[split]['recall@5']} | {r[split]['anywhere']} | {r['p50_query_ms']} "
                             f"({r['p50_query_cpu_ms']}) |")
    return "\n".join(lines)


def _local_embedding(long_texts: str) -> Any:
    from graphrag.embedding import local_embedding

    return local_embedding(long_texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus")
    parser.add_argument("--questions", required=True)
    parser.add_argument("--extraction", default="nlp", help="comma-separated: nlp, llm (mock server)")
    parser.add_argument("--modes", default=",".join(MODES_WITH_PASSAGES))
    parser.add_argument("--working-dir", help="kept after the run (default: a temporary dir per extraction)")
    parser.add_argument("--limit", type=int, help="first N questions only")
    parser.add_argument("--long-texts", choices=["pooled", "truncated"],
                        help="local_embedding(long_texts=...) for chunks; default: the engine's default")
    parser.add_argument("--reuse-index", action="store_true",
                        help="query the index a previous run kept in --working-dir instead of indexing")
    parser.add_argument("--lexical", choices=("on", "off", "both"), default="on",
                        help="the lexical channel (BM25) on, off, or both in turn over one index "
                             "(built with it on, then asked with it off)")
    parser.add_argument("--split", choices=SPLITS,
                        help="even-numbered questions (dev), odd-numbered (test) or all; default: all three")
    parser.add_argument("--variants", default="",
                        help='hybrid again under other constants: "name:CONST=value,...;name2:..."')
    parser.add_argument("--ablation", action="store_true",
                        help="hybrid with none of issue 35's pieces, each alone and all together")
    parser.add_argument("--relation-vectors", action="store_true",
                        help="enable_relation_vectors=True: keep relation vectors, seed the walk from facts")
    parser.add_argument("--rerank", help="GraphRAGConfig.rerank for every query")
    parser.add_argument("--param", action="append", default=[], metavar="FIELD=JSON",
                        help="a QueryParam field for every question, e.g. named_headings_first=false (repeatable)")
    args = parser.parse_args()
    if args.reuse_index and not args.working_dir:
        parser.error("--reuse-index needs --working-dir")

    query_options = {name: json.loads(value) for name, _, value in (p.partition("=") for p in args.param)}
    passages, questions = load_qa(args.corpus, args.questions)
    questions = questions[:args.limit] if args.limit else questions
    modes = [m for m in args.modes.split(",") if m]
    sys.path.insert(0, HERE)
    records = []
    for extraction in [e for e in args.extraction.split(",") if e]:
        working_dir = (os.path.join(args.working_dir, extraction) if args.working_dir
                       else tempfile.mkdtemp(prefix=f"retrieval-eval-{extraction}-"))
        os.makedirs(working_dir, exist_ok=True)
        server = None
        try:
            base_url = None
            if extraction == "llm" and not args.reuse_index:
                from bench import start_server

                server, base_url = start_server(0.0)
            embedding = _local_embedding(args.long_texts) if args.long_texts else None
            splits = [args.split] if args.split else SPLITS
            config = {**({"enable_relation_vectors": True} if args.relation_vectors else {}),
                      **({"rerank": args.rerank} if args.rerank else {})}
            for n, lexical in enumerate({"on": [True], "off": [False], "both": [True, False]}[args.lexical]):
                records.append(evaluate(passages, questions, extraction, modes, working_dir, base_url, embedding,
                                        args.reuse_index or n > 0, splits, lexical,
                                        {**(ablation_variants() if args.ablation else {}), **parse_variants(args.variants)},
                                        query_options, **config))
                print(json.dumps(records[-1]), flush=True)
        finally:
            if server is not None:
                server.terminate()
                server.wait()
            if not args.working_dir:
                shutil.rmtree(working_dir, ignore_errors=True)
    print(markdown_table(records))


if __name__ == "__main__":
    main()
