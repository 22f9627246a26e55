"""The ``graphrag`` command: index files, ask questions, inspect and prune a working dir.

Heavy modules (the engine, networkx, numpy, the embedding model) are imported inside the
commands that need them, so ``graphrag --help`` and ``graphrag --version`` stay cheap and
``graphrag stats`` / ``graphrag docs`` never load an embedding model.
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import sys
import time
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Optional, Sequence

from graphrag.errors import (
    ConfigurationError,
    ContextOverflowError,
    DocumentNotFound,
    EntityNotFound,
    InvalidInputError,
    LLMError,
    NoLLMConfiguredError,
    StorageError,
    StoreUnavailableError,
)
from graphrag.cli_common import (
    EXIT_EXTRACTION_FAILED,
    EXIT_FAILED,
    EXIT_LLM,
    EXIT_OK,
    EXIT_USAGE,
    CLIError,
    cli_embedding_func,
    existing_working_dir,
    open_rag,
)
from graphrag.operators.modes import describe_modes, mode_names

if TYPE_CHECKING:
    from graphrag.config import GraphRAGConfig
    from graphrag.file_insert import FilesReport
    from graphrag.inspection import Inspection
    from graphrag.server.workspaces import Workspaces

# The engine's errors a user can act on, with their exit codes: each is one line on stderr.
# The most specific class of an error decides; anything not here is a bug and keeps its traceback
# (masked like a log line).
EXIT_CODES: dict[type[BaseException], int] = {
    LLMError: EXIT_LLM,
    StorageError: EXIT_FAILED,  # unreadable store files, another writer holding the lock
    StoreUnavailableError: EXIT_FAILED,  # a store's server down: a write refused, nothing written
    DocumentNotFound: EXIT_FAILED,
    EntityNotFound: EXIT_FAILED,
    ConfigurationError: EXIT_USAGE,  # a context window too small included
    InvalidInputError: EXIT_USAGE,
    FileNotFoundError: EXIT_USAGE,
}

RERANK_KEY_ENV = "GRAPHRAG_RERANK_API_KEY"  # the bearer token of a rerank endpoint (graphrag eval --rerank)

EPILOG = """\
exit codes:
  0  success
  1  nothing to do or not found: no indexable text, unknown document id,
     unreadable working dir files, another writer holding the lock too long
  2  usage error: bad arguments or options (e.g. a context window too small for
     the prompts), a path or working dir that does not exist
  3  LLM problem: none configured (set OPENAI_API_KEY / OPENAI_BASE_URL, or use
     --offline), or an LLM call that failed after its retries
  4  index: extraction failed for every chunk (the model ignored the output
     format, even after a repair turn); the chunks are kept for a retry by the
     next `graphrag index`; try a stronger model, --extraction-fallback nlp or
     --offline

environment:
  OPENAI_API_KEY, OPENAI_BASE_URL  the LLM endpoint (any OpenAI-compatible server)
  GRAPHRAG_POSTGRES_DSN            PostgreSQL connection string for the postgres and
                                   pgvector stores (or libpq's PGHOST, PGUSER, ...)
  GRAPHRAG_NEO4J_URI, GRAPHRAG_NEO4J_USER, GRAPHRAG_NEO4J_PASSWORD, GRAPHRAG_NEO4J_DATABASE
                                   the Bolt server of the neo4j graph store
  GRAPHRAG_MILVUS_URI, GRAPHRAG_MILVUS_TOKEN
                                   Milvus for the milvus vector store (default: Milvus
                                   Lite on milvus.db in the working dir)
  GRAPHRAG_KV_STORAGE, GRAPHRAG_VECTOR_STORAGE, GRAPHRAG_GRAPH_STORAGE, GRAPHRAG_WORKSPACE
                                   the same as the --*-storage and --workspace flags
  GRAPHRAG_EMBEDDING_BASE_URL, GRAPHRAG_EMBEDDING_MODEL, GRAPHRAG_EMBEDDING_DIM,
  GRAPHRAG_EMBEDDING_API_KEY       the same as the --embedding-* flags, and the server's key
  GRAPHRAG_LEXICAL_RETRIEVAL=0|1   the same as --no-lexical / --lexical (default on)
  GRAPHRAG_EMBEDDING=hash          use a fast fake embedding (384-dim, no model) instead
                                   of the local all-MiniLM-L6-v2 model; for tests and
                                   benchmarks only, and a working dir must always be
                                   used with the embedding it was built with
"""


# --------------------------------------------------------------------------- helpers


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("filegraphrag")
    except Exception:  # not installed as a distribution (e.g. run from a source tree)
        from graphrag import __version__

        return __version__


def _setup_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    if verbose < 2:  # their INFO lines are per-request noise
        for name in ("httpx", "openai", "sentence_transformers", "filelock"):
            logging.getLogger(name).setLevel(logging.WARNING)


def _inspect(working_dir: str) -> Inspection:
    from graphrag.graphrag import GraphRAG

    return GraphRAG.inspect(working_dir)


def _llm_options(args: argparse.Namespace) -> dict[str, Any]:
    """Config for the LLM flags: a local server names its own models and window, and one
    server serves both models, so ``--max-async`` bounds them together."""
    config: dict[str, Any] = {}
    for flag, value in (("--context-window", args.context_window), ("--max-async", args.max_async)):
        if value is not None and value < 1:
            raise CLIError(f"{flag} must be at least 1", EXIT_USAGE)
    if args.model:
        config["best_model_name"] = config["cheap_model_name"] = args.model
    if args.cheap_model:
        config["cheap_model_name"] = args.cheap_model
    if args.context_window is not None:
        config["best_model_max_token_size"] = config["cheap_model_max_token_size"] = args.context_window
    if args.max_async is not None:
        config.update(best_model_max_async=args.max_async, cheap_model_max_async=args.max_async,
                      llm_max_async_total=args.max_async)
    for name in ("embedding_base_url", "embedding_model", "embedding_dim"):
        if getattr(args, name, None) is not None:
            config[name] = getattr(args, name)
    lexical = getattr(args, "lexical", None)
    if lexical is None:
        lexical = _env_switch(LEXICAL_ENV)
    if lexical is not None:
        config["lexical_retrieval"] = lexical
    return config


LEXICAL_ENV = "GRAPHRAG_LEXICAL_RETRIEVAL"
_SWITCH_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
                  "off": False}


def _env_switch(variable: str) -> Optional[bool]:
    """An on/off environment variable: None when unset or empty; a usage error for a value
    that is neither (a typo must not silently leave the default on)."""
    value = os.environ.get(variable, "").strip().lower()
    if not value:
        return None
    if value not in _SWITCH_VALUES:
        raise CLIError(f"{variable} must be on or off (1/0, true/false, yes/no), not {value!r}", EXIT_USAGE)
    return _SWITCH_VALUES[value]


def _llm_configured(offline: bool) -> bool:
    if offline:
        return True
    from graphrag.config import GraphRAGConfig, llm_configured

    return llm_configured(GraphRAGConfig(working_dir=".", always_create_working_dir=False))


NO_LLM_LINE = ("no LLM is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a local "
               "OpenAI-compatible server), or use --offline for LLM-free indexing")


def _llm_totals(usage: dict[str, dict[str, int]]) -> tuple[int, int]:
    calls = sum(s.get("calls", 0) for s in usage.values())
    cached = sum(s.get("cached", 0) for s in usage.values())
    return calls, cached


# --------------------------------------------------------------------------- index


def cmd_index(args: argparse.Namespace) -> int:
    missing = [p for p in args.paths if not os.path.exists(p)]
    if missing:
        raise CLIError(f"no such file or directory: {', '.join(missing)}", EXIT_USAGE)
    if not _llm_configured(args.offline):
        raise CLIError(NO_LLM_LINE, EXIT_LLM)
    config = _llm_options(args)
    if args.extraction_fallback:
        config["extraction_fallback"] = args.extraction_fallback
    if args.user_dictionary:
        config["nlp_user_dictionary"] = args.user_dictionary
    if args.chunk_size is not None:
        if args.chunk_size < 20:
            raise CLIError("--chunk-size must be at least 20 tokens", EXIT_USAGE)
        config["chunk_token_size"] = args.chunk_size
        config["chunk_overlap_token_size"] = min(100, args.chunk_size // 8)
    if args.max_file_size is not None and args.max_file_size <= 0:
        raise CLIError("--max-file-size must be positive", EXIT_USAGE)
    from graphrag.readers import ReadOptions

    options = ReadOptions(text_field=args.text_field, title_field=args.title_field,
                          **({"max_file_bytes": int(args.max_file_size * 2**20)} if args.max_file_size else {}))
    started = time.perf_counter()
    # Closed at the end (``with``): the store files are then folded whole (docs/CRASH_SAFETY.md).
    with open_rag(args.working_dir, args.offline, create=True, **config) as rag:
        report = rag.insert_files(args.paths, include=args.include, exclude=args.exclude, options=options)
    return _print_index_report(report, rag.inspection, time.perf_counter() - started, args.json)


def _print_index_report(report: FilesReport, index: Inspection, seconds: float, as_json: bool) -> int:
    """The summary: one line on stdout (or JSON with ``--json``), a line per skipped file on
    stderr; exit 1 when no file could be read at all."""
    stats = report.stats
    read_any = report.indexed or report.updated or report.unchanged or report.moved
    if as_json:
        print(json.dumps({**report.to_dict(), "seconds": round(seconds, 3)}, indent=2))
    else:
        for path, reason in report.skipped.items():
            print(f"skipped {path}: {reason}", file=sys.stderr)
    if not read_any:
        raise CLIError("nothing to index: every input file was empty or skipped")
    if as_json:
        return EXIT_OK
    holds = index.counts()
    calls, cached = _llm_totals(stats.get("llm", {}))
    files = len(report.indexed) + len(report.updated) + len(report.unchanged) + len(report.moved)
    print(
        f"indexed {files} file(s): {len(report.indexed)} new, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.moved)} moved, {len(report.skipped)} skipped; "
        f"working dir now holds {holds['documents']} documents, {holds['chunks']} chunks, {holds['entities']} "
        f"entities, {holds['relations']} relations, {stats['communities']} communities; "
        f"LLM calls: {calls} ({cached} cached); {seconds:.1f}s"
    )
    return _report_extraction(stats)


def _report_extraction(stats: dict[str, Any]) -> int:
    """The extraction outcome line (when a chunk was not simply extracted) and the exit code:
    ``EXIT_EXTRACTION_FAILED`` when the model gave no chunk of the insert any record."""
    tried = stats.get("chunks_extracted", 0) + stats.get("chunks_empty", 0) + stats.get("chunks_failed", 0)
    if any(stats.get(k) for k in ("chunks_failed", "chunks_waiting", "chunks_repaired", "chunks_retried")):
        print(f"extraction: {stats['chunks_retried']} failed chunk(s) retried; "
              f"{stats['chunks_extracted']} chunk(s) extracted ({stats['chunks_repaired']} after a "
              f"repair turn), {stats['chunks_empty']} with nothing to extract, {stats['chunks_failed']} failed "
              f"({stats['chunks_fallback']} extracted without the LLM instead); {stats['chunks_waiting']} "
              "failed chunk(s) wait for a retry by the next `graphrag index`")
    for line in stats.get("warnings", []):
        print(f"warning: {line}")
    if tried and stats["chunks_failed"] == tried and not stats.get("chunks_fallback"):
        return EXIT_EXTRACTION_FAILED
    return EXIT_OK


# --------------------------------------------------------------------------- query


def cmd_query(args: argparse.Namespace) -> int:
    wd = existing_working_dir(args.working_dir)
    from graphrag.query_param import QueryParam

    if not args.question.strip():
        raise CLIError("the question is empty", EXIT_USAGE)
    param_kwargs: dict[str, Any] = {"mode": args.mode, "only_need_context": args.context_only,
                                    "with_references": args.references}
    if args.top_k is not None:
        param_kwargs["top_k"] = args.top_k
    if args.response_type:
        param_kwargs["response_type"] = args.response_type
    param = QueryParam(**param_kwargs)
    rag = open_rag(wd, offline=True, **_llm_options(args))
    print(rag.query(args.question, param))
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    wd = existing_working_dir(args.working_dir)
    from graphrag.evaluation import evaluate_retrieval, passage_modes, read_labelled

    with open(args.questions, encoding="utf-8") as f:
        questions = read_labelled(f.read().splitlines())
    if not questions:
        raise CLIError(f"{args.questions} holds no question", EXIT_USAGE)
    modes = args.modes.split(",") if args.modes else passage_modes()
    unknown = sorted(set(modes) - set(passage_modes()))
    if unknown:
        raise CLIError(f"not a passage mode: {', '.join(unknown)} (choose from {', '.join(passage_modes())})",
                       EXIT_USAGE)
    try:
        ks = sorted({int(k) for k in args.k.split(",")})
    except ValueError:
        raise CLIError(f"-k takes whole numbers separated by commas, not {args.k!r}", EXIT_USAGE) from None
    rerank = {"rerank": args.rerank, "rerank_model": args.rerank_model,
              "rerank_api_key": os.environ.get(RERANK_KEY_ENV)} if args.rerank else {}
    rag = open_rag(wd, offline=True, **rerank, **_llm_options(args))
    results = asyncio.run(evaluate_retrieval(rag, questions, modes, ks, args.top_k))
    if args.json:
        print(json.dumps({"questions": len(questions), "modes": results}, indent=2))
        return EXIT_OK
    columns = [*(f"recall@{k}" for k in ks), "in_context"]
    print(f"{len(questions)} questions; recall in % of gold items")
    print("mode      " + "  ".join(f"{c:>10}" for c in columns))
    for mode, scores in results.items():
        print(f"{mode:<10}" + "  ".join(f"{scores[c]:>10.1f}" for c in columns))
    return EXIT_OK


# --------------------------------------------------------------------------- stats / docs


def cmd_stats(args: argparse.Namespace) -> int:
    stats = _inspect(existing_working_dir(args.working_dir)).stats()
    if args.json:
        print(json.dumps(stats, indent=2))
        return EXIT_OK
    levels = ", ".join(f"level {k}: {v}" for k, v in stats["communities_per_level"].items()) or "none"
    models = ", ".join(f"{k}: {v}" for k, v in stats["llm_cached_responses_by_model"].items())
    lines = [
        f"working dir      {stats['working_dir']}",
        f"documents        {stats['documents']}",
        f"chunks           {stats['chunks']}",
    ]
    if stats["chunks_failed_extraction"]:
        lines.append(f"failed chunks    {stats['chunks_failed_extraction']} wait for a retry by the next "
                     f"`graphrag index` ({stats['chunks_failed_with_fallback']} extracted without the LLM meanwhile)")
    lines += [
        f"entities         {stats['entities']}",
        f"relations        {stats['relations']}",
        f"communities      {stats['communities']} ({levels})",
        f"extraction       {'offline (no LLM)' if stats['built_offline'] else 'LLM'}",
        f"LLM cache        {stats['llm_cached_responses']} cached responses" + (f" ({models})" if models else ""),
    ]
    total = stats["llm_usage_total"]
    if total:
        lines.append(f"LLM usage        {total.get('calls', 0)} calls ({total.get('cached', 0)} cached), "
                     f"{total.get('prompt_tokens', 0)} prompt + {total.get('completion_tokens', 0)} "
                     "completion tokens (all inserts and deletes so far)")
    for key, label in (("entity_vectors", "entity vectors"), ("chunk_vectors", "chunk vectors"),
                       ("relation_vectors", "relation vectors")):
        info = stats[key]
        if info:
            lines.append(f"{label:<17}{info['vectors']} x {info['dim']} dims")
    lines.append(f"size on disk     {stats['size_human']} ({stats['size_bytes']} bytes in {stats['files']} files)")
    if stats["commit_pending"]:
        lines.append("note             a commit is in progress (or was interrupted; the next write finishes it)")
    print("\n".join(lines))
    return EXIT_OK


def cmd_docs(args: argparse.Namespace) -> int:
    from graphrag.server.doc_status import document_rows, read_statuses

    wd = existing_working_dir(args.working_dir)
    # The server's statuses (queued, processing, failed, cancelled) beside the indexed documents.
    docs = document_rows(_inspect(wd).documents(), read_statuses(wd))
    if args.status:
        docs = [d for d in docs if d["status"] == args.status]
    if args.json:
        print(json.dumps(docs, indent=2))
        return EXIT_OK
    if not docs:
        print(f"no {args.status} documents" if args.status else "no documents indexed")
        return EXIT_OK
    print(f"{'id':<40}  {'status':<10}  {'chars':>8}  {'chunks':>6}  {'failed':>6}  source")
    for d in docs:
        print(f"{d['id']:<40}  {d['status']:<10}  {d['chars'] if d['chars'] is not None else '-':>8}  "
              f"{d['chunks'] if d['chunks'] is not None else '-':>6}  {d['failed_chunks']:>6}  {d['source'] or '-'}")
        if d["error"]:
            print(f"{'':<40}  {d['error']}")
    waiting = sum(d["failed_chunks"] for d in docs)
    if waiting:
        print(f"{waiting} chunk(s) failed extraction and wait for a retry by the next `graphrag index`")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    wd = existing_working_dir(args.working_dir)
    known = {d["id"] for d in _inspect(wd).documents()}
    unknown = [i for i in args.doc_ids if i not in known]
    if unknown:
        raise CLIError(f"unknown document id(s): {', '.join(unknown)} (list them with `graphrag docs "
                       f"--working-dir {wd}`)")
    # An offline index stays offline; an LLM index re-summarises with the LLM when one is set up.
    offline = args.offline or _inspect(wd).built_offline() or not _llm_configured(False)
    with open_rag(wd, offline, **_llm_options(args)) as rag:
        stats = rag.delete_documents(args.doc_ids)
    calls, cached = _llm_totals(stats.get("llm", {}))
    print(f"deleted {stats['documents_removed']} document(s), {stats['chunks_removed']} chunk(s); "
          f"{stats['communities']} communities remain; LLM calls: {calls} ({cached} cached)")
    return EXIT_OK


# --------------------------------------------------------------------------- storage backends

_STORAGE_FLAGS = {"kv_storage": "GRAPHRAG_KV_STORAGE", "vector_storage": "GRAPHRAG_VECTOR_STORAGE",
                  "graph_storage": "GRAPHRAG_GRAPH_STORAGE", "workspace": "GRAPHRAG_WORKSPACE"}


def _add_storage_flags(parser: argparse.ArgumentParser) -> None:
    from graphrag.backends import backend_names

    group = parser.add_argument_group("storage (default: files in the working dir; connection strings "
                                      "only from the environment, never a flag: see below)")
    for kind in ("kv", "vector", "graph"):
        group.add_argument(f"--{kind}-storage", choices=backend_names(kind), help=f"the {kind} store's backend")
    group.add_argument("--workspace", metavar="NAME", help="the index's name inside a shared database")


def _apply_storage_flags(args: argparse.Namespace) -> None:
    """The flags become the variables the engine's config reads, so every command sees them."""
    for option, variable in _STORAGE_FLAGS.items():
        value = getattr(args, option, None)
        if value:
            os.environ[variable] = value


# --------------------------------------------------------------------------- serve / mcp


def _serving(args: argparse.Namespace) -> tuple[Workspaces, Optional[str]]:
    """The service over ``--working-dir`` (created if missing) with its workspaces, and the API
    key if one is set."""
    from graphrag.server.security import API_KEY_ENV, check_binding
    from graphrag.server.service import GraphService
    from graphrag.server.workspaces import Workspaces

    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    check_binding(args.host, api_key, args.allowed_host)  # before any model loads: a refusal is immediate
    workers = getattr(args, "workers", 0)
    if workers < 0:
        raise CLIError("--workers must be 0 or more", EXIT_USAGE)
    input_dir = getattr(args, "input_dir", None)
    if input_dir is not None and not os.path.isdir(input_dir):
        raise CLIError(f"--input-dir: no such folder: {input_dir}", EXIT_USAGE)
    if args.max_open_workspaces < 1:
        raise CLIError("--max-open-workspaces must be 1 or more", EXIT_USAGE)
    # The reader processes build the same config from the same flags and variables.
    service = GraphService(_serving_config(args), read_only=args.read_only, input_dir=input_dir, workers=workers,
                           worker_config=functools.partial(_serving_config, args))
    return Workspaces(service, max_open=args.max_open_workspaces), api_key


def _serving_config(args: argparse.Namespace) -> GraphRAGConfig:
    """The served working dir's config from the flags. Inserts are LLM-free with --offline, or
    when the index was built so."""
    from graphrag.config import GraphRAGConfig

    wd = args.working_dir
    offline = args.offline or (os.path.isdir(wd) and _inspect(wd).built_offline())
    return GraphRAGConfig(working_dir=wd, extraction="nlp" if offline else "llm",
                          embedding_func=cli_embedding_func(), **_llm_options(args))


def cmd_serve(args: argparse.Namespace) -> int:
    from graphrag.server.app import serve

    service, api_key = _serving(args)
    print(f"serving {args.working_dir} on http://{args.host}:{args.port}/ (API docs at /docs)", file=sys.stderr)
    serve(service, host=args.host, port=args.port, api_key=api_key, allowed_hosts=args.allowed_host)
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from graphrag.server.mcp_tools import run_mcp

    service, api_key = _serving(args)
    run_mcp(service, transport=args.transport, host=args.host, port=args.port, api_key=api_key,
            allowed_hosts=args.allowed_host)
    return EXIT_OK


def _add_serving_options(p: argparse.ArgumentParser, port: int) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other needs an API key)")
    p.add_argument("--port", type=int, default=port, help=f"port (default {port})")
    p.add_argument("--api-key", metavar="KEY", help="key every request must carry (default: $GRAPHRAG_API_KEY)")
    p.add_argument("--offline", action="store_true", help="LLM-free inserts (extraction='nlp')")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a Host name clients use to reach the server (repeatable; needed with --host 0.0.0.0; "
                        "loopback names and the --host address are always served)")
    p.add_argument("--read-only", action="store_true", help="no endpoint or tool that inserts or deletes")
    from graphrag.server import DEFAULT_MAX_OPEN_WORKSPACES

    p.add_argument("--max-open-workspaces", type=int, default=DEFAULT_MAX_OPEN_WORKSPACES, metavar="N",
                   help=f"named workspaces (X-Workspace) kept open at most (default {DEFAULT_MAX_OPEN_WORKSPACES}): "
                        "the least recently used idle one closes when another opens, and reopens on its next request")


def cmd_entities(args: argparse.Namespace) -> int:
    """Entity resolution for a person: what was merged, what might be, and corrections."""
    wd = existing_working_dir(args.working_dir)
    if args.merge or args.never or args.undo:
        if bool(args.merge) != bool(args.into):
            raise CLIError("--merge NAME... needs --into NAME (and --into needs --merge)", EXIT_USAGE)
        offline = args.offline or _inspect(wd).built_offline() or not _llm_configured(False)
        with open_rag(wd, offline, **_llm_options(args)) as rag:
            if args.merge:
                rag.merge_entities(args.merge, into=args.into)
                print(f"merged {', '.join(args.merge)} into {args.into} (kept across later inserts and deletes)")
            if args.never:
                rag.never_merge(*args.never)
                print(f"{args.never[0]} and {args.never[1]} will never be merged")
            if args.undo:
                undone = rag.undo_entity_decisions(args.undo)["undone"]
                for name, into in undone["merges"].items():
                    print(f"undone: {name} merged into {into}")
                for a, b in undone["never"]:
                    print(f"undone: {a} and {b} never merged")
        return EXIT_OK
    if args.duplicates:
        groups = open_rag(wd, offline=True).entity_duplicates()
        if args.json:
            print(json.dumps(groups, indent=2))
            return EXIT_OK
        for group in groups:
            nodes: dict[str, list[str]] = {}
            for name, node in group["node"].items():
                nodes.setdefault(node, []).append(name)
            print(" | ".join(_with_aliases(node, [n for n in names if n != node]) for node, names in sorted(nodes.items())))
            for p in group["pairs"]:
                print(f"    {p['verdict']:<9} {p['score']:.2f}  {p['a']} ~ {p['b']}  ({p['relation']}; types "
                      f"{'/'.join(p['types'])}; {p['shared_neighbour_count']} shared neighbours; "
                      f"description similarity {p['description_similarity']})")
        if not groups:
            print("no candidate duplicates")
        return EXIT_OK
    merged = _inspect(wd).merged_entities()
    print(json.dumps(merged, indent=2) if args.json else "\n".join(_with_aliases(n, a) for n, a in merged.items()))
    return EXIT_OK


def _with_aliases(name: str, aliases: list[str]) -> str:
    return f"{name} <= {', '.join(aliases)}" if aliases else name


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log progress (INFO); twice for DEBUG")
    wd = argparse.ArgumentParser(add_help=False)
    wd.add_argument("--working-dir", "-w", required=True, metavar="DIR", help="the working directory")
    _add_storage_flags(wd)
    llm = argparse.ArgumentParser(add_help=False)
    group = llm.add_argument_group("LLM (any OpenAI-compatible server: see OPENAI_BASE_URL below)")
    group.add_argument("--model", metavar="NAME", help="model for extraction, reports and answers (default gpt-4o)")
    group.add_argument("--cheap-model", metavar="NAME",
                       help="model for description summaries (default: --model, else gpt-4o-mini)")
    group.add_argument("--context-window", type=int, metavar="TOKENS",
                       help="the models' context window; prompts are cut to fit it (default 32768)")
    group.add_argument("--max-async", type=int, metavar="N", help="requests in flight at once (default 16)")
    group = llm.add_argument_group("embeddings (default: the bundled English all-MiniLM-L6-v2; an index keeps "
                                   "the embedder it was built with)")
    group.add_argument("--embedding-base-url", metavar="URL",
                       help="an OpenAI-compatible server's /v1 URL to embed with (with --embedding-model and "
                            "--embedding-dim; key from GRAPHRAG_EMBEDDING_API_KEY)")
    group.add_argument("--embedding-model", metavar="NAME",
                       help="the server's embedding model; without --embedding-base-url, a sentence-transformers "
                            "model name or path run locally")
    group.add_argument("--embedding-dim", type=int, metavar="N", help="the embedding model's vector size")
    group = llm.add_argument_group("retrieval")
    group.add_argument("--lexical", action=argparse.BooleanOptionalAction, default=None,
                       help="the lexical channel: a BM25 index over chunks (jieba's words for Chinese), kept at "
                            "every insert and fused into naive and hybrid ranking for questions not mostly in "
                            "Latin script; for languages the embedder does not read (default: on, or "
                            "$GRAPHRAG_LEXICAL_RETRIEVAL=1/0)")

    parser = argparse.ArgumentParser(
        prog="graphrag", description="File-backed GraphRAG: index text files, then ask questions.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log progress (INFO); twice for DEBUG")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help: str, parents: list) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, parents=parents, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = add("index", "index files and folders: PDF, Word .docx, HTML, Markdown, text, JSON/JSONL records "
            "(an edited file replaces its old version; unchanged files cost nothing)", [common, wd, llm])
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, or folders walked recursively")
    p.add_argument("--offline", action="store_true", help="LLM-free extraction and reports (extraction='nlp')")
    p.add_argument("--chunk-size", type=int, metavar="N", help="chunk size in tokens (default 1200)")
    p.add_argument("--user-dictionary", metavar="FILE",
                   help="offline extraction of Chinese: a jieba user dictionary (one 'word [freq] [tag]' a "
                        "line) whose domain terms are segmented whole and become entities")
    p.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="only files matching GLOB (repeatable; matched against the path inside the folder "
                        "and the file name); files of other types matched this way are read as text")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out files and folders matching GLOB (repeatable)")
    p.add_argument("--max-file-size", type=float, metavar="MB", help="skip files bigger than this (default 100)")
    p.add_argument("--text-field", default="text", metavar="NAME", help="JSON/JSONL records: the text field")
    p.add_argument("--title-field", default="title", metavar="NAME", help="JSON/JSONL records: the title field")
    p.add_argument("--json", action="store_true", help="print the summary as JSON: files per outcome, "
                   "skipped files with their reason, insert stats")
    p.add_argument("--extraction-fallback", choices=("nlp",), default=None,
                   help="nlp: chunks the model fails on (no record in its answers) get LLM-free extraction; "
                        "they are still retried by the next index run")
    p.set_defaults(func=cmd_index)

    p = add("query", "answer a question from the index", [common, wd, llm])
    p.add_argument("question")
    p.add_argument("--mode", choices=mode_names(), default="global", help=describe_modes())
    p.add_argument("--context-only", action="store_true", help="print the retrieved context; no LLM call")
    p.add_argument("--top-k", type=int, metavar="K", help="entities (local) or chunks (naive) retrieved")
    p.add_argument("--response-type", metavar="TEXT", help="e.g. 'Single Paragraph' (default: Multiple Paragraphs)")
    p.add_argument("--references", action="store_true", help="cite sources as [n] and list them after the answer")
    p.set_defaults(func=cmd_query)

    p = add("eval", "retrieval recall on your labelled questions, per passage mode (no LLM call)", [common, wd, llm])
    p.add_argument("questions", metavar="QUESTIONS.jsonl",
                   help='one JSON object a line: {"question": ..., "gold_sources": [document source or id, ...]} '
                        'or {"question": ..., "gold_passages": [a snippet of each needed passage, ...]}')
    p.add_argument("--modes", metavar="MODE,MODE", help="default: every passage mode")
    p.add_argument("-k", default="2,5", metavar="K,K", help="the cut-offs of Recall@k (default 2,5)")
    p.add_argument("--top-k", type=int, metavar="K", help="QueryParam.top_k for every mode")
    p.add_argument("--rerank", metavar="SPEC", help="with the rerank stage: cross-encoder:NAME_OR_PATH, a rerank "
                   "endpoint's URL (its key in GRAPHRAG_RERANK_API_KEY), llm (listwise by the cheap model) or "
                   "embedding (the index's embedding model: headings the question names, best sentences); "
                   "compare with a run without")
    p.add_argument("--rerank-model", metavar="NAME", help="the model name a Cohere / Jina endpoint is asked for")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_eval)

    p = add("stats", "counts and sizes of a working dir (loads no model)", [common, wd])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_stats)

    p = add("docs", "list documents: id, status, source, chars, chunks (with a server's queued, failed "
                    "and cancelled ones)", [common, wd])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    from graphrag.server.doc_status import STATUSES

    p.add_argument("--status", choices=STATUSES,
                   help="only the documents with this status")
    p.set_defaults(func=cmd_docs)

    p = add("delete", "delete documents by id, and everything only they contributed", [common, wd, llm])
    p.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    p.add_argument("--offline", action="store_true",
                   help="rebuild touched entities without the LLM (automatic for offline indexes)")
    p.set_defaults(func=cmd_delete)

    p = add("serve", "serve the index over HTTP: an API (OpenAPI at /docs) and a web page at /",
            [common, wd, llm])
    _add_serving_options(p, 8000)
    p.add_argument("--input-dir", metavar="DIR",
                   help="a folder POST /documents/scan indexes the new and changed files of (as `graphrag index DIR`)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="reader processes answering queries (default 1; up to one per core adds throughput); "
                        "0 answers them in the server's process. Writes always run in the server's process")
    p.set_defaults(func=cmd_serve)

    p = add("mcp", "serve the index to agents as MCP tools (stdio, or streamable HTTP at /mcp)", [common, wd, llm])
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default stdio")
    _add_serving_options(p, 8001)
    p.set_defaults(func=cmd_mcp)

    from graphrag.cli_graph import add_commands  # graph, retrieve, export

    add_commands(add, common, wd)


    p = add("entities", "merged entities and their other names; --duplicates to review candidates", [common, wd, llm])
    p.add_argument("--duplicates", action="store_true", help="candidate groups of one thing under several names, "
                   "with the evidence for and against each pair")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--merge", nargs="+", metavar="NAME", help="merge these entities (with --into), for good")
    p.add_argument("--into", metavar="NAME", help="the name the merged entity keeps")
    p.add_argument("--never", nargs=2, metavar=("NAME", "NAME"), help="never merge these two entities")
    p.add_argument("--undo", nargs="+", metavar="NAME",
                   help="drop every --merge or --never decision naming these entities")
    p.add_argument("--offline", action="store_true", help="rebuild touched entities without the LLM")
    p.set_defaults(func=cmd_entities)
    return parser


def _fail(message: str, code: int) -> NoReturn:
    from graphrag.redaction import redact  # a model or database error may quote a key or password

    print(f"graphrag: error: {redact(message)}", file=sys.stderr)
    raise SystemExit(code)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    _setup_logging(args.verbose)
    from graphrag.redaction import protect_logs, register_secret

    protect_logs()  # the handler just configured masks secrets in every line, traceback included
    register_secret(getattr(args, "api_key", None))
    _apply_storage_flags(args)
    try:
        return args.func(args)
    except CLIError as exc:
        _fail(str(exc), exc.code)
    except KeyboardInterrupt:
        _fail("interrupted (the working dir keeps its last committed state)", 130)
    except BrokenPipeError:  # output piped into `head` and friends
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        code = exit_code(exc)
        if code is None:  # a bug: it leaves main, and Python prints its traceback masked
            sys.excepthook = _masked_excepthook
            raise
        logging.getLogger(__name__).debug("the traceback of the error below", exc_info=exc)
        _fail(_error_line(exc), code)


def _masked_excepthook(kind: type[BaseException], value: BaseException, tb: Optional[TracebackType]) -> None:
    """Python's report of an uncaught exception, with secrets masked (a model server's error
    may quote the key it was sent)."""
    from graphrag.redaction import redact

    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))


def exit_code(exc: BaseException) -> Optional[int]:
    """``exc``'s exit code from ``EXIT_CODES``, by its most specific class; None for a bug."""
    return next((EXIT_CODES[cls] for cls in type(exc).__mro__ if cls in EXIT_CODES), None)


def _error_line(exc: BaseException) -> str:
    """The error as the CLI user should read it: with the flags to use rather than the options."""
    if isinstance(exc, NoLLMConfiguredError):
        return NO_LLM_LINE
    if isinstance(exc, ContextOverflowError):
        return f"{exc}; here: --context-window TOKENS, and --chunk-size N"
    return str(exc)


if __name__ == "__main__":
    sys.exit(main())
