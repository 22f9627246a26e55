"""The engine's facade: documents in, knowledge graph and community reports out, questions
answered.

``GraphRAG`` holds the config, the stores and the clients (embedding, LLM, tokenizer) and
the public API, each ``a*`` method with its blocking twin (``aio.blocking``: one event loop
per thread, kept across calls). Indexing is ``graphrag/indexing/`` (the write scope, the
pipeline, documents' outcomes, entity decisions); answering is the query section below.
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Optional, Sequence, Union

from graphrag.aio import blocking, blocking_stream, run_at_exit, run_sync
from graphrag.config import GraphRAGConfig, check_no_nano_graphrag_only_options, llm_configured
from graphrag.embedding import EmbeddingFunc, embedding_from_config, limited
from graphrag.errors import ConfigurationError, DocumentNotFound, WorkingDirLockedError
from graphrag.indexing import entity_decisions
from graphrag.indexing.documents import insert_documents
from graphrag.indexing.heap import FrozenHeap
from graphrag.indexing.index_meta import has_documents, update_index_meta
from graphrag.indexing.pipeline import Pipeline
from graphrag.indexing.scope import committing, embedding_for_index, recover_if_possible
from graphrag.inspection import Inspection
from graphrag.locking import writer_lock
from graphrag.query_param import QueryParam
from graphrag.stores import Stores, open_stores
from graphrag.windows import ModelWindows

if TYPE_CHECKING:
    from graphrag.file_insert import FilesReport
    from graphrag.graph_api import KnowledgeGraph
    from graphrag.querying import QueryEngine
    from graphrag.querying.streaming import AnswerStream
    from graphrag.readers import ReadDocument, ReadOptions
    from graphrag.records import Answer, Retrieval
    from graphrag.llm.client import LLMClient
    from graphrag.operators.rerank import Reranker
    from graphrag.operators.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

class GraphRAG:
    """``GraphRAG(working_dir=..., **config_fields)`` or ``GraphRAG(config)``; ``close()`` (or
    ``with`` / ``async with``) releases its connections."""

    def __init__(self, config: Optional[GraphRAGConfig] = None, **overrides: Any) -> None:
        check_no_nano_graphrag_only_options(overrides)
        self.config = replace(config, **overrides) if config is not None else GraphRAGConfig(**overrides)
        wd = self.config.working_dir
        if not os.path.isdir(wd):
            if not self.config.always_create_working_dir:
                raise FileNotFoundError(f"working dir {wd!r} does not exist")
            os.makedirs(wd, exist_ok=True)
            logger.info("Created working dir %s", wd)
        self.embedding_func: EmbeddingFunc = limited(embedding_from_config(self.config),
                                                     self.config.embedding_func_max_async)
        self.stores: Stores = open_stores(self.config, self.embedding_func)
        recover_if_possible(self.config, self.stores)
        self._tokenizer: Optional[Tokenizer] = None
        self._llms: Optional[tuple[LLMClient, LLMClient]] = None
        from graphrag.llm import UsageCounter

        self.usage = UsageCounter()
        self._built_reranker: Optional[Reranker] = None
        self.last_insert_stats: Optional[dict[str, Any]] = None
        self._index_version = 0
        self._wrote = False  # committed since the last close: journals to fold
        self._knowledge_graph: Optional[KnowledgeGraph] = None

    # ------------------------------------------------------------------ clients

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            from graphrag.operators.tokenizer import get_tokenizer

            self._tokenizer = get_tokenizer(self.config.tiktoken_model_name)
        return self._tokenizer

    @property
    def windows(self) -> ModelWindows:
        return ModelWindows(self.config, self.tokenizer)

    @property
    def llms(self) -> tuple[LLMClient, LLMClient]:
        """(best, cheap) LLM clients, built on first use so offline work never imports openai."""
        if self._llms is None:
            from graphrag.llm import build_llm_clients

            # Counting is looked up at use, so building the clients does not load the tokenizer.
            self._llms = build_llm_clients(self.config, self.usage, self.stores.llm_response_cache,
                                           lambda text: self.tokenizer.count(text))
        return self._llms

    async def aclose(self) -> None:
        """Fold the store journals this instance's writes added to into their files (the
        ``kv_store_*.json`` that nano-graphrag's tools read then hold every record; see
        ``storage/kv_json.py``), then ``arelease()``. Idempotent."""
        if self._wrote and self.stores.journals_pending():
            try:
                async with writer_lock(self.config.working_dir, self.config.lock_timeout):
                    self.stores.recover()
                    await self.stores.fold_journals()
                self._wrote = False
                _unclosed_writers.discard(self)
            except WorkingDirLockedError:
                logger.info("Journals of %s left for a later close: another writer holds the lock",
                            self.config.working_dir)
        else:  # a later commit of its own folded them: nothing is left for the exit
            _unclosed_writers.discard(self)
        await self.arelease()

    async def arelease(self) -> None:
        """Release the LLM clients' connections and the stores' (a database's pool) opened on
        the running loop. Idempotent; a later call opens them again. Every sync call ends
        with it; the sync calls' loop is the thread's (``aio.run_sync``), kept for the user's
        clients bound to it."""
        if self._llms is not None:
            for client in set(self._llms):
                await client.aclose()
        await self.stores.close()

    def close(self) -> None:
        run_sync(self.aclose())

    def __enter__(self) -> "GraphRAG":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "GraphRAG":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ the write scope

    @asynccontextmanager
    async def _writing(self, every_store: bool = True) -> AsyncIterator[Pipeline]:
        """Lock, bring the stores up to date with disk, and commit all of them together or none
        (``indexing/scope.py``); the block gets the write's ``Pipeline``.

        ``every_store=False`` opens only the documents and ``index_meta`` (enough to tell
        whether there is work); the caller opens the rest with ``stores.index_start()``.
        """
        async with writer_lock(self.config.working_dir, self.config.lock_timeout):
            # The heap alive before the write set aside from the collector until the commit is done.
            with FrozenHeap():
                self.stores.recover()
                embedding_func = await embedding_for_index(self.config, self.stores, self.embedding_func)
                if embedding_func is not None:
                    self.embedding_func = embedding_func
                    self.stores = open_stores(self.config, self.embedding_func)
                try:
                    async with committing(self.stores, every_store, lambda: update_index_meta(
                            self.stores, self.usage.snapshot(), self.embedding_func.long_texts, self.embedding_func.name)):
                        yield Pipeline(self)
                except BaseException:
                    # Drop the half-applied in-memory state; disk still holds the last commit
                    # (and the LLM cache journal keeps every answer already paid for).
                    failed, self.stores = self.stores, open_stores(self.config, self.embedding_func)
                    # A database's pool would live on, on the thread's loop, unless closed.
                    for close in (failed.close, self.arelease):
                        with contextlib.suppress(Exception):
                            await close()
                    self._llms = self._built_reranker = None  # they held the replaced cache store
                    raise
                else:
                    self._wrote = True
                    if self.stores.journals_pending():
                        _unclosed_writers.add(self)
                finally:
                    self._index_version += 1  # what the graph API remembered describes the index before

    async def _has_documents(self) -> bool:
        return await has_documents(self.stores)

    # ------------------------------------------------------------------ insert

    async def ainsert(self, docs: Union[str, list[str]], sources: Optional[list[Optional[str]]] = None
                      ) -> dict[str, Any]:
        """Index documents; already indexed ones cost nothing. A document whose ``source``
        matches an indexed one with other content replaces it (an update). Chunks whose
        extraction failed before are extracted again, by every insert until they succeed."""
        from graphrag.operators.documents import prepare_documents

        documents, skipped = prepare_documents(docs, sources)
        stats, _ = await self._insert_prepared(documents, skipped)
        return stats

    insert = blocking(ainsert)

    async def ainsert_files(self, paths: Union[str, list[str]], include: Sequence[str] = (),
                            exclude: Sequence[str] = (), options: Optional["ReadOptions"] = None) -> "FilesReport":
        """Index files and folders (PDF, Word, HTML, Markdown, text, JSON records), keeping
        where each passage came from. Folders are walked for the ``include`` globs (default:
        every readable type) minus the ``exclude`` ones; bad files are reported and skipped;
        an unchanged file costs nothing, an edited one is an update, a moved one keeps its
        extraction. See ``graphrag/file_insert.py``."""
        from graphrag.file_insert import FilesReport, read_files
        from graphrag.operators.documents import prepare_documents
        from graphrag.readers import ReadOptions

        read = await asyncio.to_thread(read_files, [paths] if isinstance(paths, str) else list(paths),
                                       include, exclude, options or ReadOptions(), self.config.show_progress)
        documents, skipped = prepare_documents(read.texts(), read.sources(), read.details())
        stats, outcomes = await self._insert_prepared(documents, skipped, may_move=read.may_move)
        return FilesReport.build(read, outcomes, stats)

    insert_files = blocking(ainsert_files)

    async def ainsert_read(self, documents: list["ReadDocument"]) -> dict[str, Any]:
        """Index documents a reader produced from bytes (uploads: ``readers.read_data``),
        keeping their titles, pages and headings."""
        from graphrag.file_insert import details_of
        from graphrag.operators.documents import prepare_documents

        prepared, skipped = prepare_documents([d.text for d in documents], [d.source for d in documents],
                                              details_of(documents))
        stats, _ = await self._insert_prepared(prepared, skipped)
        return stats

    insert_read = blocking(ainsert_read)

    async def _insert_prepared(self, documents: dict[str, dict[str, Any]], skipped: int,
                               may_move: Optional[Callable[[str, str], bool]] = None
                               ) -> tuple[dict[str, Any], dict[str, tuple[str, Optional[str]]]]:
        """Insert prepared documents (``indexing/documents.py``): the stats, and per document
        its outcome with the source the index now records for it."""
        self.usage.reset()
        started = time.perf_counter()
        async with self._writing(every_store=False) as write:
            inserted = await insert_documents(write, documents, may_move)
        stats = {
            **inserted.summary,
            "documents_skipped_empty": skipped,
            "documents_already_indexed": inserted.already_indexed,
            "documents_moved": inserted.moved,
            "seconds": round(time.perf_counter() - started, 3),
            "llm": self.usage.snapshot(),
        }
        self.last_insert_stats = stats
        logger.info("Insert done: %s", {k: v for k, v in stats.items() if k != "llm"})
        logger.info("LLM usage by stage: %s", stats["llm"])
        return stats, inserted.outcomes

    # ------------------------------------------------------------------ delete, recluster, list

    async def adelete_documents(self, doc_ids: Union[str, list[str]]) -> dict[str, Any]:
        """Remove documents and everything only they contributed; other sources' facts stay."""
        ids = [doc_ids] if isinstance(doc_ids, str) else list(dict.fromkeys(doc_ids))
        self.usage.reset()
        async with self._writing() as write:
            missing = await self.stores.full_docs.filter_keys(ids)
            if missing:
                raise DocumentNotFound(f"unknown document id(s): {', '.join(sorted(missing))} "
                                       "(list them with list_documents() or `graphrag docs`)", missing=sorted(missing))
            summary = await write.apply_changes({}, ids)
        return {**summary, "llm": self.usage.snapshot()}

    delete_documents = blocking(adelete_documents)

    async def arecluster(self) -> dict[str, Any]:
        """Re-run Leiden over the whole graph from scratch and re-report what changed.

        Inserts and deletes place nodes incrementally so that untouched communities keep
        their reports; after many of them, this restores the partition a fresh index
        would have (community ids are kept where membership overlaps).
        """
        self.usage.reset()
        async with self._writing() as write:
            await self.stores.graph.clustering(self.config.graph_cluster_algorithm, full=True)
            communities, generated, failures = await write.report()
        return {"communities": communities, "reports_generated": generated, "reports_failed": failures.failed,
                "llm": self.usage.snapshot()}

    recluster = blocking(arecluster)

    @staticmethod
    def inspect(working_dir: str) -> Inspection:
        """Read-only over a working dir's files (``graphrag stats``, ``docs``): no embedding
        model, no LLM, no lock, no recovery; see ``graphrag/inspection.py``."""
        return Inspection.open(working_dir)

    @property
    def inspection(self) -> Inspection:
        """The same reads over this engine's stores."""
        return Inspection(self.stores, self.config.working_dir)

    async def alist_documents(self) -> list[dict[str, Any]]:
        keys = await self.stores.full_docs.all_keys()
        records = await self.stores.full_docs.get_by_ids(keys)
        return [
            {"id": k, "source": r.get("source"), "chars": len(r.get("content", "")),
             "chunks": len(r.get("chunk_ids", []))}
            for k, r in zip(keys, records) if r
        ]

    list_documents = blocking(alist_documents)

    # ------------------------------------------------------------------ entity resolution

    async def _decide(self, decision: Callable[[Pipeline], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """A manual entity decision, recorded and applied in one write."""
        if not self.config.entity_resolution:
            raise ConfigurationError("entity decisions need entity_resolution=True")
        self.usage.reset()
        async with self._writing() as write:
            summary = await decision(write)
        return {**summary, "llm": self.usage.snapshot()}

    async def amerge_entities(self, names: Union[str, list[str]], into: str) -> dict[str, Any]:
        """Merge ``names`` into one node named ``into``, for good: the decision is kept
        apart from the derived ones and holds across later inserts and deletes."""
        names = [names] if isinstance(names, str) else list(names)
        return await self._decide(lambda write: entity_decisions.merge_entities(write, names, into))

    merge_entities = blocking(amerge_entities)

    async def anever_merge(self, a: str, b: str) -> dict[str, Any]:
        """Keep the entities named ``a`` and ``b`` in different nodes, whatever the evidence."""
        return await self._decide(lambda write: entity_decisions.never_merge(write, a, b))

    never_merge = blocking(anever_merge)

    async def aundo_entity_decisions(self, names: Union[str, list[str]]) -> dict[str, Any]:
        """Drop every manual decision (merge or never-merge) naming one of ``names``; the
        graph goes back to what the evidence decides for them."""
        names = [names] if isinstance(names, str) else list(names)
        return await self._decide(lambda write: entity_decisions.undo_decisions(write, names))

    undo_entity_decisions = blocking(aundo_entity_decisions)

    async def aresolve_pending(self) -> dict[str, Any]:
        """Ask the resolution judge every pair a write left pending for want of calls (a
        write asks at most a share of its extraction calls), and rebuild what its verdicts
        merge: the graph a single write of every document would give."""
        return await self._decide(entity_decisions.resolve_pending)

    resolve_pending = blocking(aresolve_pending)

    async def acanonical_entity(self, name: str) -> Optional[str]:
        """The node an entity name is in (itself, or the node it was merged into); None if
        no extraction named it."""
        try:
            return await entity_decisions.canonical_entity(Pipeline(self), name)
        finally:
            await self.stores.query_done()

    canonical_entity = blocking(acanonical_entity)

    async def aentity_duplicates(self) -> list[dict[str, Any]]:
        """Groups of names merged or worth a look, each pair with its evidence (read only)."""
        try:
            return await entity_decisions.entity_duplicates(Pipeline(self))
        finally:
            await self.stores.query_done()

    entity_duplicates = blocking(aentity_duplicates)

    # ------------------------------------------------------------------ query

    @property
    def knowledge_graph(self) -> KnowledgeGraph:
        """The graph as an API (entity, neighbors, traverse, paths, subgraph, search,
        graph_search; see ``graphrag/graph_api.py``). ``self.stores.graph`` is the store it reads."""
        if self._knowledge_graph is None:
            from graphrag.graph_api import KnowledgeGraph

            self._knowledge_graph = KnowledgeGraph(lambda: self.stores, lambda: self._index_version)
        return self._knowledge_graph

    def _querying(self) -> QueryEngine:
        """What a query reads, handed to the answer policy (``graphrag/querying/``)."""
        from graphrag.querying import QueryEngine

        # The passage modes read the reranker and the head they reorder from the stores (operators/rerank.py).
        self.stores.reranker = self._reranker()
        self.stores.head_candidates = self.config.rerank_candidates
        return QueryEngine(config=self.config, stores=self.stores, tokenizer=self.tokenizer, windows=self.windows,
                           graph=self.knowledge_graph, has_documents=self._has_documents,
                           best_llm=(lambda: self.llms[0]) if llm_configured(self.config) else None)

    def _reranker(self) -> Optional[Reranker]:
        """The configured rerank stage (``GraphRAGConfig.rerank``), built once; None when off."""
        if self._built_reranker is None and self.config.rerank:
            from graphrag.rerank import build_reranker

            self._built_reranker = build_reranker(
                self.config.rerank, self.config.rerank_candidates, usage=self.usage,
                cache=self.stores.llm_response_cache, cheap_llm=lambda: self.llms[1], tokenizer=self.tokenizer,
                model=self.config.rerank_model, api_key=self.config.rerank_api_key,
                embedding_func=self.embedding_func, sentence_store=lambda: self.stores.sentence_vectors)
        return self._built_reranker

    async def aretrieve(self, query: str, param: QueryParam = QueryParam()) -> Retrieval:
        """What ``param.mode`` retrieves for ``query`` as records (chunks, entities, relations,
        reports, each with its documents); ``.context`` is the ``only_need_context`` string.
        Nothing found (or nothing indexed): a Retrieval with no records and no context."""
        return await self._querying().retrieve(query, param)

    retrieve = blocking(aretrieve)

    async def aquery_result(self, query: str, param: QueryParam = QueryParam()) -> Answer:
        """The answer as an object citing its sources: ``.text`` cites ``[n]``, ``.references``
        maps each ``n`` kept to its documents, chunk or report and an excerpt. Without an LLM
        (or with ``only_need_context``) the text is the numbered context, every source listed."""
        return await self._querying().answer_result(query, param)

    query_result = blocking(aquery_result)

    async def aquery(self, query: str, param: QueryParam = QueryParam()) -> str:
        return await self._querying().answer(query, param)

    query = blocking(aquery)

    async def aquery_stream(self, query: str, param: QueryParam = QueryParam()) -> AsyncIterator[str]:
        """The answer in pieces as the model writes them; a cached answer, a context
        (``only_need_context``, no LLM) or a canned reply comes as one piece. With
        ``param.with_references`` the cited answer streams the same way and its reference list
        comes as the last piece: joined, the pieces are ``aquery``'s answer. For the references
        as records, use :meth:`aquery_result_stream`."""
        async with contextlib.aclosing(self._querying().stream(query, param)) as pieces:
            async for piece in pieces:
                yield piece

    query_stream = blocking_stream(aquery_stream)

    def aquery_result_stream(self, query: str, param: QueryParam = QueryParam()) -> "AnswerStream":
        """The answer's text in pieces as the model writes them (``async for piece in stream``),
        then, once they have all come, ``stream.answer``: the :class:`Answer` they make, with the
        cited references when ``param.with_references`` (what ``aquery_result`` returns)."""
        return self._querying().stream_result(query, param)


# Instances that committed into a journal and were not closed. A script that ends without
# ``close()`` (as nano-graphrag's examples do) still leaves every ``kv_store_*.json`` whole for
# the tools that read them: the journals of its large stores are folded as the interpreter
# exits. Held strongly: those examples drop the instance (it lives in a function) before the
# exit, and its in-memory stores are what the fold writes.
_unclosed_writers: "set[GraphRAG]" = set()


@atexit.register
def _fold_at_exit() -> None:
    for rag in list(_unclosed_writers):
        try:
            run_at_exit(rag.aclose)
        except Exception as exc:  # the journals stay; this engine replays them on the next open
            logger.warning("Journals of %s not folded at exit: %s", rag.config.working_dir, exc)
