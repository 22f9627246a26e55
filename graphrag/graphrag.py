"""The engine: documents in, knowledge graph and community reports out, questions answered.

Reading order is the pipeline's (``_apply_changes``): chunk -> extract -> merge -> record
-> cluster -> report, with embedding beside them, then commit. Every insert or delete runs
under the working dir's writer lock and commits all stores in one transaction (see
``storage/files.py``), so a killed run leaves the previous state, and re-running it finishes
the job with the LLM answers already paid for served from the response cache journal.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine, Optional, Sequence, TypeVar, Union

from graphrag.config import GraphRAGConfig, check_no_nano_graphrag_only_options
from graphrag.embedding import EmbeddingFunc, follows_index, limited, local_embedding
from graphrag.embedding_scheme import check_scheme, record_scheme, recorded_scheme
from graphrag.errors import DocumentNotFound
from graphrag.locking import try_lock, writer_lock
from graphrag.progress import Progress
from graphrag.query_param import QueryParam
from graphrag.scheduling import BackgroundWork, StageTimer
from graphrag.schema import ChunkExtraction, ChunkRecord
from graphrag.stores import Stores, open_stores
from graphrag.windows import ANSWER_TOKENS, ModelWindows

if TYPE_CHECKING:
    from graphrag.file_insert import FilesReport
    from graphrag.graph_api import KnowledgeGraph
    from graphrag.operators.documents import ChunkPlan
    from graphrag.operators.format_failures import FormatFailures
    from graphrag.readers import ReadDocument, ReadOptions
    from graphrag.querying import QueryEngine
    from graphrag.records import Answer, Retrieval

logger = logging.getLogger(__name__)

T = TypeVar("T")

# An insert's extraction outcome counts (see ``failed_chunks.extraction_counts``), none extracted.
NO_EXTRACTION_COUNTS: dict[str, Any] = {
    "chunks_retried": 0, "chunks_extracted": 0, "chunks_empty": 0, "chunks_failed": 0, "chunks_repaired": 0,
    "chunks_fallback": 0, "chunks_waiting": 0, "reports_failed": 0, "warnings": []}

# Stores that only the reports and the LLM cache change after clustering: written ahead
# while the reports are generated, leaving the commit less to do.
_WRITTEN_BEFORE_REPORTS = ["full_docs", "text_chunks", "chunk_extractions", "graph", "entities_vdb", "chunks_vdb",
                           "relations_vdb"]


def _run_sync(coro: Coroutine[Any, Any, T], cleanup: Optional[Callable[[], Coroutine[Any, Any, None]]] = None) -> T:
    """Thin sync wrapper; refuses politely inside a running loop (notebooks: use the a* methods).

    ``cleanup`` runs before the temporary loop closes, so HTTP connections opened on it are
    closed rather than left to the garbage collector.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        async def run_then_clean_up() -> T:
            try:
                return await coro
            finally:
                if cleanup is not None:
                    await cleanup()

        return asyncio.run(run_then_clean_up())
    coro.close()
    raise RuntimeError("called a sync GraphRAG method inside a running event loop; await the async "
                       "version instead (ainsert, aquery, adelete_documents)")


def _without_marks(record: dict[str, Any]) -> dict[str, Any]:
    """A document record as stored: a reader's marks live on in its chunks' positions."""
    return {k: v for k, v in record.items() if k != "marks"}


def llm_configured(config: GraphRAGConfig) -> bool:
    return bool(config.best_model_func or config.llm_api_key or config.llm_base_url
                or os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


class GraphRAG:
    """``GraphRAG(working_dir=..., **config_fields)`` or ``GraphRAG(config)``."""

    def __init__(self, config: Optional[GraphRAGConfig] = None, **overrides: Any) -> None:
        check_no_nano_graphrag_only_options(overrides)
        self.config = replace(config, **overrides) if config is not None else GraphRAGConfig(**overrides)
        wd = self.config.working_dir
        if not os.path.isdir(wd):
            if not self.config.always_create_working_dir:
                raise FileNotFoundError(f"working dir {wd!r} does not exist")
            os.makedirs(wd, exist_ok=True)
            logger.info("Created working dir %s", wd)
        self.embedding_func: EmbeddingFunc = limited(self.config.embedding_func or local_embedding(),
                                                     self.config.embedding_func_max_async)
        self.stores: Stores = open_stores(self.config, self.embedding_func)
        self._recover_if_possible()
        self._tokenizer: Any = None
        self._llms: Any = None
        from graphrag.llm import UsageCounter

        self.usage = UsageCounter()
        self._built_reranker: Any = None
        self.last_insert_stats: Optional[dict[str, Any]] = None
        self._index_version = 0
        self._knowledge_graph: Optional[KnowledgeGraph] = None

    # ------------------------------------------------------------------ plumbing

    def _recover_if_possible(self) -> None:
        """Finish a commit a killed writer left (or drop its temp files), if no writer is active;
        else wait for it."""
        if not self.stores.needs_recovery():
            return
        lock = try_lock(self.config.working_dir)
        if lock is None:
            self.stores.wait_for_commit()
            return
        try:
            self.stores.recover()
        finally:
            lock.release()

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from graphrag.operators.tokenizer import get_tokenizer

            self._tokenizer = get_tokenizer(self.config.tiktoken_model_name)
        return self._tokenizer

    @property
    def windows(self) -> ModelWindows:
        return ModelWindows(self.config, self.tokenizer)

    @property
    def llms(self) -> Any:
        """(best, cheap) LLM clients, built on first use so offline work never imports openai."""
        if self._llms is None:
            from graphrag.llm import build_llm_clients

            # Counting is looked up at use, so building the clients does not load the tokenizer.
            self._llms = build_llm_clients(self.config, self.usage, self.stores.llm_response_cache,
                                           lambda text: self.tokenizer.count(text))
        return self._llms

    def _get_ready_to_extract(self) -> None:
        """Load the embedding model and open the LLM clients in the background, overlapping
        chunking (and, for the embedding model, extraction); then check every indexing
        prompt's window, so a window too small fails before any call is paid for."""
        warm_up = getattr(self.embedding_func.func, "warm_up", None)
        if warm_up is not None:
            loading = asyncio.create_task(asyncio.to_thread(warm_up))
            loading.add_done_callback(lambda t: t.cancelled() or t.exception())
        if self.config.extraction == "llm" and llm_configured(self.config):
            for client in set(self.llms):
                client.warm_up()
        if self.config.extraction == "llm":
            self.windows.check_indexing()  # loads the tokenizer, so after the clients start building

    async def _close_llm_connections(self) -> None:
        if self._llms is not None:
            for client in set(self._llms):
                await client.aclose()
        await self.stores.close()  # a database store's pool lives on this event loop

    @asynccontextmanager
    async def _writing(self, every_store: bool = True) -> AsyncIterator[None]:
        """Lock, bring the stores up to date with disk, and commit all of them together or none.

        ``every_store=False`` opens only the documents and ``index_meta`` (enough to tell
        whether there is work); the caller opens the rest with ``stores.index_start()``.
        """
        wd = self.config.working_dir
        async with writer_lock(wd, self.config.lock_timeout):
            self.stores.recover()
            await self._settle_embedding_scheme()
            try:
                # Open for the whole write, so stores finished early can be written ahead
                # (``Stores.write_ahead``); nothing becomes visible before the end. A database
                # store takes its writer lock in ``index_start``, so that is inside too.
                async with self.stores.transaction():
                    await self.stores.index_start(None if every_store else ["full_docs", "index_meta"])
                    yield
                    await self._update_index_meta()
                    await self.stores.index_done()
            except BaseException:
                # Drop the half-applied in-memory state; disk still holds the last commit
                # (and the LLM cache journal keeps every answer already paid for).
                self.stores = open_stores(self.config, self.embedding_func)
                with contextlib.suppress(Exception):
                    await self._close_llm_connections()
                self._llms = None  # they held the replaced cache store
                raise
            finally:
                self._index_version += 1  # what the graph API remembered describes the index before

    async def _settle_embedding_scheme(self) -> None:
        """Index with the long-text embedding scheme the index was built with (or refuse an
        explicit other one), so chunk vectors of one index stay comparable."""
        recorded = await recorded_scheme(self.stores.index_meta, await self._has_documents())
        scheme = check_scheme(recorded, self.embedding_func.long_texts, follows_index(self.config.embedding_func))
        if scheme != self.embedding_func.long_texts:
            self.embedding_func = limited(local_embedding(scheme), self.config.embedding_func_max_async)
            self.stores = open_stores(self.config, self.embedding_func)

    async def _update_index_meta(self) -> None:
        """Cumulative LLM usage, and the document count a query checks without reading the docs."""
        meta = self.stores.index_meta
        if meta is None:
            return
        totals = dict(await meta.get_by_id("llm_usage") or {})
        usage = self.usage.snapshot()
        for stage, counts in usage.items():
            stage_totals = dict(totals.get(stage, {}))
            for key, value in counts.items():
                stage_totals[key] = stage_totals.get(key, 0) + value
            totals[stage] = stage_totals
        before = await meta.get_by_id("counts")
        counts = {**(before or {}), "documents": len(await self.stores.full_docs.all_keys())}
        if self.stores.is_open("community_reports"):
            counts["communities"] = len(await self.stores.community_reports.all_keys())
        if usage or counts != before:  # a no-op insert writes nothing
            await meta.upsert({"llm_usage": totals, "counts": counts})
        if counts["documents"]:
            await record_scheme(meta, self.embedding_func.long_texts)

    async def _recorded_count(self, what: str) -> Optional[int]:
        meta = self.stores.index_meta
        record = await meta.get_by_id("counts") if meta is not None else None
        count = record.get(what) if isinstance(record, dict) else None
        return count if isinstance(count, int) else None  # None: a dir written before the counts

    async def _has_documents(self) -> bool:
        count = await self._recorded_count("documents")
        return count > 0 if count is not None else bool(await self.stores.full_docs.all_keys())

    async def _nothing_changed(self) -> dict[str, Any]:
        communities = await self._recorded_count("communities")
        if communities is None:
            communities = len(await self.stores.community_reports.all_keys())
        return {"documents_inserted": 0, "documents_removed": 0, "chunks_inserted": 0, "chunks_removed": 0,
                "entities_changed": 0, "malformed_records_skipped": 0, "communities": communities,
                "reports_generated": 0, **NO_EXTRACTION_COUNTS, "stage_seconds": {}}

    # ------------------------------------------------------------------ insert

    def insert(self, docs: Union[str, list[str]], sources: Optional[list[Optional[str]]] = None) -> dict[str, Any]:
        return _run_sync(self.ainsert(docs, sources), self._close_llm_connections)

    async def ainsert(self, docs: Union[str, list[str]], sources: Optional[list[Optional[str]]] = None
                      ) -> dict[str, Any]:
        """Index documents; already indexed ones cost nothing. A document whose ``source``
        matches an indexed one with other content replaces it (an update). Chunks whose
        extraction failed before are extracted again, by every insert until they succeed."""
        from graphrag.operators.documents import prepare_documents

        documents, skipped = prepare_documents(docs, sources)
        stats, _ = await self._insert_prepared(documents, skipped)
        return stats

    def insert_files(self, paths: Union[str, list[str]], include: Sequence[str] = (), exclude: Sequence[str] = (),
                     options: Optional["ReadOptions"] = None) -> "FilesReport":
        return _run_sync(self.ainsert_files(paths, include, exclude, options), self._close_llm_connections)

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

    def insert_read(self, documents: list["ReadDocument"]) -> dict[str, Any]:
        return _run_sync(self.ainsert_read(documents), self._close_llm_connections)

    async def ainsert_read(self, documents: list["ReadDocument"]) -> dict[str, Any]:
        """Index documents a reader produced from bytes (uploads: ``readers.read_data``),
        keeping their titles, pages and headings."""
        from graphrag.file_insert import details_of
        from graphrag.operators.documents import prepare_documents

        prepared, skipped = prepare_documents([d.text for d in documents], [d.source for d in documents],
                                              details_of(documents))
        stats, _ = await self._insert_prepared(prepared, skipped)
        return stats

    async def _insert_prepared(self, documents: dict[str, dict[str, Any]], skipped: int,
                               may_move: Optional[Callable[[str, str], bool]] = None
                               ) -> tuple[dict[str, Any], dict[str, tuple[str, Optional[str]]]]:
        """Insert prepared documents: the stats, and per document its outcome ("new",
        "updated", "unchanged" or, when ``may_move(doc_id, old_source)`` allows, "moved")
        with the source the index now records for it."""
        from graphrag.failed_chunks import read_failed_chunks
        from graphrag.operators.documents import moved_documents, superseded_documents

        self.usage.reset()
        started = time.perf_counter()
        async with self._writing(every_store=False):
            unknown = await self.stores.full_docs.filter_keys(list(documents))
            new_docs = {k: v for k, v in documents.items() if k in unknown}
            failed = await read_failed_chunks(self.stores.index_meta)
            if new_docs or failed:
                self._get_ready_to_extract()
            replaced: list[str] = []
            replaced_sources: set[Optional[str]] = set()
            if any(d.get("source") for d in new_docs.values()):
                indexed = await self._stored_sources()
                replaced = superseded_documents(new_docs, indexed, keep=documents)
                replaced_sources = {indexed[k] for k in replaced}
            known_sources: dict[str, Optional[str]] = {}
            moved: dict[str, str] = {}
            if may_move is not None:
                known_sources = await self._stored_sources([k for k in documents if k not in unknown])
                moved = moved_documents(documents, known_sources, may_move)
            if new_docs or replaced or moved or failed:
                await self.stores.index_start()
            if moved:
                await self._record_moves({k: documents[k] for k in moved})
            if new_docs or replaced or failed:
                summary = await self._apply_changes(new_docs, replaced, retry_failed=True)
            else:
                summary = await self._nothing_changed()
        stats = {
            **summary,
            "documents_skipped_empty": skipped,
            "documents_already_indexed": len(documents) - len(new_docs),
            "documents_moved": len(moved),
            "seconds": round(time.perf_counter() - started, 3),
            "llm": self.usage.snapshot(),
        }
        self.last_insert_stats = stats
        logger.info("Insert done: %s", {k: v for k, v in stats.items() if k != "llm"})
        logger.info("LLM usage by stage: %s", stats["llm"])

        def outcome(doc_id: str, source: Optional[str]) -> tuple[str, Optional[str]]:
            if doc_id in moved:
                return "moved", source
            if doc_id not in new_docs:
                return "unchanged", known_sources.get(doc_id)
            return ("updated" if source in replaced_sources else "new"), source

        return stats, {k: outcome(k, d.get("source")) for k, d in documents.items()}

    async def _stored_sources(self, doc_ids: Optional[list[str]] = None) -> dict[str, Optional[str]]:
        """``{doc_id: source}`` of the given indexed documents (default: all of them)."""
        keys = await self.stores.full_docs.all_keys() if doc_ids is None else doc_ids
        records = await self.stores.full_docs.get_by_ids(keys, fields={"source"})
        return {k: r.get("source") for k, r in zip(keys, records) if r}

    async def _record_moves(self, moved: dict[str, dict[str, Any]]) -> None:
        """Indexed documents found under a new source: their records and their chunks'
        positions follow it; nothing is extracted again."""
        from graphrag.operators.positions import locate_chunks

        stores = self.stores
        ids = list(moved)
        stored = dict(zip(ids, await stores.full_docs.get_by_ids(ids)))
        chunk_ids = sorted({c for r in stored.values() if r for c in r.get("chunk_ids", [])})
        chunks = {c: r for c, r in zip(chunk_ids, await stores.text_chunks.get_by_ids(chunk_ids))
                  if r and r.get("full_doc_id") in moved}
        await stores.text_chunks.upsert(locate_chunks(chunks, moved))  # type: ignore[arg-type]
        await stores.full_docs.upsert({k: {**r, **_without_marks(moved[k])} for k, r in stored.items() if r})

    # ------------------------------------------------------------------ delete

    def delete_documents(self, doc_ids: Union[str, list[str]]) -> dict[str, Any]:
        return _run_sync(self.adelete_documents(doc_ids), self._close_llm_connections)

    async def adelete_documents(self, doc_ids: Union[str, list[str]]) -> dict[str, Any]:
        """Remove documents and everything only they contributed; other sources' facts stay."""
        ids = [doc_ids] if isinstance(doc_ids, str) else list(dict.fromkeys(doc_ids))
        self.usage.reset()
        async with self._writing():
            missing = await self.stores.full_docs.filter_keys(ids)
            if missing:
                raise DocumentNotFound(f"unknown document id(s): {', '.join(sorted(missing))} "
                                       "(list them with list_documents() or `graphrag docs`)", missing=sorted(missing))
            summary = await self._apply_changes({}, ids)
        return {**summary, "llm": self.usage.snapshot()}

    def recluster(self) -> dict[str, Any]:
        return _run_sync(self.arecluster(), self._close_llm_connections)

    async def arecluster(self) -> dict[str, Any]:
        """Re-run Leiden over the whole graph from scratch and re-report what changed.

        Inserts and deletes place nodes incrementally so that untouched communities keep
        their reports; after many of them, this restores the partition a fresh index
        would have (community ids are kept where membership overlaps).
        """
        self.usage.reset()
        async with self._writing():
            await self.stores.graph.clustering(self.config.graph_cluster_algorithm, full=True)
            communities, generated, failures = await self._report()
        return {"communities": communities, "reports_generated": generated, "reports_failed": failures.failed,
                "llm": self.usage.snapshot()}

    async def alist_documents(self) -> list[dict[str, Any]]:
        keys = await self.stores.full_docs.all_keys()
        records = await self.stores.full_docs.get_by_ids(keys)
        return [
            {"id": k, "source": r.get("source"), "chars": len(r.get("content", "")),
             "chunks": len(r.get("chunk_ids", []))}
            for k, r in zip(keys, records) if r
        ]

    def list_documents(self) -> list[dict[str, Any]]:
        return _run_sync(self.alist_documents(), self._close_llm_connections)

    # ------------------------------------------------------------------ entity resolution

    def merge_entities(self, names: Union[str, list[str]], into: str) -> dict[str, Any]:
        return _run_sync(self.amerge_entities(names, into), self._close_llm_connections)

    async def amerge_entities(self, names: Union[str, list[str]], into: str) -> dict[str, Any]:
        """Merge ``names`` into one node named ``into``, for good: the decision is kept
        apart from the derived ones and holds across later inserts and deletes."""
        from graphrag.entity_decisions import merge_entities

        return await merge_entities(self, [names] if isinstance(names, str) else list(names), into)

    def never_merge(self, a: str, b: str) -> dict[str, Any]:
        return _run_sync(self.anever_merge(a, b), self._close_llm_connections)

    async def anever_merge(self, a: str, b: str) -> dict[str, Any]:
        """Keep the entities named ``a`` and ``b`` in different nodes, whatever the evidence."""
        from graphrag.entity_decisions import never_merge

        return await never_merge(self, a, b)

    def canonical_entity(self, name: str) -> Optional[str]:
        return _run_sync(self.acanonical_entity(name), self._close_llm_connections)

    async def acanonical_entity(self, name: str) -> Optional[str]:
        """The node an entity name is in (itself, or the node it was merged into); None if
        no extraction named it."""
        from graphrag.entity_decisions import canonical_entity

        return await canonical_entity(self, name)

    def entity_duplicates(self) -> list[dict[str, Any]]:
        return _run_sync(self.aentity_duplicates(), self._close_llm_connections)

    async def aentity_duplicates(self) -> list[dict[str, Any]]:
        """Groups of names merged or worth a look, each pair with its evidence (read only)."""
        from graphrag.entity_decisions import entity_duplicates

        return await entity_duplicates(self)

    # ------------------------------------------------------------------ the pipeline

    async def _apply_changes(self, new_docs: dict[str, dict[str, Any]], removed_doc_ids: list[str],
                             retry_failed: bool = False) -> dict[str, Any]:
        """Add ``new_docs`` and take out ``removed_doc_ids`` (an update does both), inside the
        caller's write; with ``retry_failed``, extract the chunks that failed before again.
        What runs beside what is decided here and only here."""
        from graphrag.failed_chunks import extraction_counts, failed_after, read_failed_chunks
        from graphrag.operators.clustering import cluster_after_write
        from graphrag.operators.graph_update import (MergeAhead, finish_graph_update, relation_vectors_to_backfill,
                                                     store_entity_vectors)

        stores, timer = self.stores, StageTimer()
        with timer.stage("chunk"):
            docs_to_store, plan = await self._chunk(new_docs, removed_doc_ids)
        removed_extractions = await self._recorded_extractions(sorted(plan.removed_chunks))
        failed_before = await read_failed_chunks(stores.index_meta)
        retried = await self._chunks_to_retry(failed_before, plan) if retry_failed else {}
        # A retried chunk's record is replaced; one that comes out the same changes nothing.
        earlier = await self._recorded_extractions(sorted(retried))

        def unchanged(chunk_id: str, extraction: ChunkExtraction) -> bool:
            before = earlier.get(chunk_id, {"entities": [], "relations": []})
            return (chunk_id in retried and extraction["entities"] == before["entities"]
                    and extraction["relations"] == before["relations"])

        to_extract = {**plan.new_chunks, **retried}

        resolution = (self._entity_resolution(plan.removed_chunks, lambda: merge.extracted)
                      if self.config.entity_resolution else None)
        aliases = await resolution.aliases() if resolution is not None else None
        if resolution is None and stores.index_meta is not None:
            from graphrag.operators.resolution_update import forget_derived_state

            await forget_derived_state(stores.index_meta)
        # Chunk vectors need only the chunk text: they are embedded while the LLM extracts,
        # from its first answer on; until then the CPU goes to what the first requests wait
        # for (chunking, the LLM client's build).
        first_extracted = asyncio.Event()
        if self.config.extraction != "llm" or not to_extract:
            first_extracted.set()

        async with BackgroundWork(timer) as background:
            chunk_vectors = background.start(self._embed_chunks(plan.new_chunks), after=(first_extracted,),
                                             stage="embed")

            def merge_ahead(work: Coroutine[Any, Any, T]) -> "asyncio.Task[T]":
                # The report stage's code loads meanwhile (once a process): a first insert would
                # otherwise import it between the last extraction answer and the first report.
                background.start(asyncio.to_thread(importlib.import_module, "graphrag.operators.community_reports"))
                return background.start(work, stage="merge_ahead")

            merge = MergeAhead(
                self._rebuild_pass(lambda ids: self._recorded_extractions(ids, also=merge.extracted),
                                   replaced=earlier, aliases=aliases),
                removed=removed_extractions, expected=len(to_extract),
                tail=max(1, self.config.best_model_max_async // 4), start=merge_ahead)

            def extracted(chunk_id: str, extraction: ChunkExtraction) -> None:
                first_extracted.set()
                if not unchanged(chunk_id, extraction):
                    merge.on_extracted(chunk_id, extraction)

            with timer.stage("extract"):
                outcomes = await self._extract(to_extract, extracted)
            first_extracted.set()
            extractions = {k: v for k, v in outcomes.items() if not unchanged(k, v)}
            counts, warning = extraction_counts(outcomes, self.config.extraction_failure_warning_share)
            failed = failed_after(failed_before, outcomes, plan.removed_chunks)

            with timer.stage("merge"):
                rebuilt = await merge.finish(extractions)
            resolved: dict[str, Any] = {}
            if resolution is not None:
                with timer.stage("resolve"):
                    rebuilt, resolved = await self._resolve(resolution, rebuilt, extractions, removed_extractions)
            # An entity is found by its name and the start of its description; embedding more
            # than half the model's window costs compute (quadratic in length) for little gain.
            vector_tokens = max(self.embedding_func.max_token_size // 2, 32)
            with timer.stage("merge"):
                changes = finish_graph_update(
                    rebuilt, graph=stores.graph,
                    summarizer=self.llms[1] if self.config.extraction == "llm" else None,
                    tokenizer=self.tokenizer, summary_max_tokens=self.config.entity_summary_to_max_tokens,
                    vector_tokens=vector_tokens,
                    start=background.start)
            await self._record(docs_to_store, removed_doc_ids, plan, extractions, (failed_before, failed))

            # Entity vectors wait for the summaries; nothing below needs them, so they are
            # embedded beside clustering and reports. Clustering needs only the structure.
            entity_vectors = background.start(store_entity_vectors(
                stores.entities_vdb, changes, stores.relations_vdb,
                backfill=lambda: relation_vectors_to_backfill(stores.graph, stores.relations_vdb, self.tokenizer,
                                                              vector_tokens)),
                after=(chunk_vectors,), stage="embed")
            communities = len(await stores.community_reports.all_keys())
            reports_generated, report_failures = 0, None
            if changes.entities_changed:
                with timer.stage("cluster"):
                    schema, changed_communities = await cluster_after_write(
                        stores.graph, rebuilt.touched, rebuilt.were_in, self.config.graph_cluster_algorithm)
                background.start(stores.write_ahead(_WRITTEN_BEFORE_REPORTS), after=(entity_vectors,),
                                 finish_on_error=True)
                with timer.stage("report"):
                    # Communities containing a description still being summarised wait for it.
                    communities, reports_generated, report_failures = await self._report(
                        schema, changes, touched=rebuilt.touched, only=changed_communities)
            else:
                logger.info("No entity or relation changed; community reports kept as they are")

        return {
            "documents_inserted": len(new_docs),
            "documents_removed": len(removed_doc_ids),
            "chunks_inserted": len(plan.new_chunks),
            "chunks_removed": len(plan.removed_chunks),
            "entities_changed": changes.entities_changed,
            "malformed_records_skipped": sum(e.get("malformed", 0) for e in outcomes.values()),
            "communities": communities,
            "reports_generated": reports_generated,
            "chunks_retried": len(retried),
            **counts,
            "chunks_waiting": len(failed),
            "reports_failed": report_failures.failed if report_failures else 0,
            "warnings": [w for w in (warning, report_failures and report_failures.warned) if w],
            "stage_seconds": timer.rounded(),
            **({"entity_resolution": resolved} if resolution is not None else {}),
        }

    async def _chunk(self, new_docs: dict[str, dict[str, Any]], removed_doc_ids: list[str]
                     ) -> tuple[dict[str, dict[str, Any]], ChunkPlan]:
        """The incoming documents with their chunk ids, and what happens to the chunks."""
        from graphrag.operators.chunking import chunk_by_tokens
        from graphrag.operators.documents import chunk_documents, plan_chunks
        from graphrag.operators.positions import locate_chunks

        full_docs = self.stores.full_docs
        chunks, by_doc = chunk_documents(
            {k: v["content"] for k, v in new_docs.items()}, self.config.chunk_func or chunk_by_tokens,
            size=self.config.chunk_token_size, overlap=self.config.chunk_overlap_token_size, tokenizer=self.tokenizer)
        leaving: set[str] = set()
        staying: dict[str, list[str]] = {}
        if removed_doc_ids:
            leaving = {c for r in await full_docs.get_by_ids(removed_doc_ids, fields={"chunk_ids"}) if r
                       for c in r.get("chunk_ids", [])}
            others = [k for k in await full_docs.all_keys() if k not in set(removed_doc_ids)]
            staying = {k: (r or {}).get("chunk_ids", [])
                       for k, r in zip(others, await full_docs.get_by_ids(others, fields={"chunk_ids"}))}
        chunks = locate_chunks(chunks, new_docs)
        unknown = await self.stores.text_chunks.filter_keys(list(chunks))
        docs_to_store = {k: {**_without_marks(v), "chunk_ids": by_doc[k]} for k, v in new_docs.items()}
        return docs_to_store, plan_chunks(chunks, unknown, leaving, staying)

    async def _chunks_to_retry(self, failed: dict[str, Any], plan: ChunkPlan) -> dict[str, ChunkRecord]:
        """The stored chunks of ``failed`` that this write keeps (not those it removes)."""
        ids = sorted(c for c in failed if c not in plan.removed_chunks and c not in plan.new_chunks)
        return {k: v for k, v in zip(ids, await self.stores.text_chunks.get_by_ids(ids)) if v}

    async def _recorded_extractions(self, chunk_ids: list[str], also: Optional[dict[str, ChunkExtraction]] = None
                                    ) -> dict[str, ChunkExtraction]:
        """What extraction found in ``chunk_ids`` (those it has a record of): this write's
        from ``also``, the others as recorded."""
        also = also or {}
        to_read = [c for c in chunk_ids if c not in also]
        found = {k: v for k, v in zip(to_read, await self.stores.chunk_extractions.get_by_ids(to_read)) if v}
        return {**{c: also[c] for c in chunk_ids if c in also}, **found}

    def _rebuild_pass(self, read: Callable[[list[str]], Any], replaced: Optional[dict[str, ChunkExtraction]] = None,
                      aliases: Optional[dict[str, str]] = None) -> Callable[..., Any]:
        """One merge pass: rebuild, in the graph, what the changed extractions touch
        (``replaced``: the earlier records of chunks extracted again; names grouped through
        ``aliases`` with entity resolution on)."""
        from graphrag.operators.graph_update import rebuild_graph

        summary_input_tokens = self.windows.summary_input_tokens() if self.config.extraction == "llm" else None

        async def read_list(ids: list[str]) -> list[Optional[ChunkExtraction]]:
            found = await read(ids)
            return [found.get(i) for i in ids]

        async def rebuild(changed: dict[str, ChunkExtraction], removed_chunks: set[str],
                          previous_aliases: Optional[dict[str, str]] = None, moved: Optional[set[str]] = None) -> Any:
            return await rebuild_graph(changed, removed_chunks, graph=self.stores.graph, read_extractions=read_list,
                                       tokenizer=self.tokenizer,
                                       summary_max_tokens=self.config.entity_summary_to_max_tokens,
                                       summary_input_tokens=summary_input_tokens, replaced=replaced,
                                       aliases=aliases, previous_aliases=previous_aliases, moved=moved)

        return rebuild

    def _entity_resolution(self, removed_chunks: set[str], extracted: Callable[[], dict[str, ChunkExtraction]]
                           ) -> Any:
        """The resolution stage over this write's stores; it reads this write's extractions
        (``extracted()``) before they are recorded."""
        from graphrag.operators.resolution_update import EntityResolution, ResolutionSettings

        async def read(ids: list[str]) -> list[Optional[ChunkExtraction]]:
            found = await self._recorded_extractions(ids, also=extracted())
            return [found.get(i) for i in ids]

        async def all_chunk_ids() -> list[str]:
            recorded = await self.stores.chunk_extractions.all_keys()
            return sorted((set(recorded) - removed_chunks) | set(extracted()))

        check = (self.config.entity_resolution_llm_check and self.config.extraction == "llm"
                 and llm_configured(self.config))
        similar = self.config.entity_resolution_embedding_threshold
        return EntityResolution(graph=self.stores.graph, meta=self.stores.index_meta, read_extractions=read,
                                all_chunk_ids=all_chunk_ids, llm=self.llms[1] if check else None,
                                cache_key=os.path.abspath(self.config.working_dir),
                                embed=self.embedding_func if similar is not None else None,
                                settings=ResolutionSettings(threshold=self.config.entity_resolution_threshold,
                                                            embedding_threshold=similar or 0.0))

    async def _resolve(self, resolution: Any, rebuilt: Any, extracted: dict[str, ChunkExtraction],
                       removed: dict[str, ChunkExtraction]) -> tuple[Any, dict[str, Any]]:
        """Resolve the names the new and removed chunks mention; rebuild the nodes whose
        names moved."""
        outcome = await resolution.resolve(extracted, removed)
        moved = await resolution.moved_chunks(outcome)
        if moved:
            rebuild = self._rebuild_pass(lambda ids: self._recorded_extractions(ids, also=extracted),
                                         aliases=outcome.state.aliases)
            rebuilt = rebuilt.then(await rebuild(moved, set(), previous_aliases=outcome.previous,
                                                 moved=None if outcome.unresolved else outcome.moved))
        return rebuilt, outcome.stats

    async def _record(self, docs: dict[str, dict[str, Any]], removed_doc_ids: list[str], plan: ChunkPlan,
                      extractions: dict[str, ChunkExtraction], failed: tuple[dict[str, Any], dict[str, Any]]
                      ) -> None:
        """Every document, chunk and extraction record the write adds or removes, and the
        failed chunks (before, after) kept for a retry, in one place."""
        from graphrag.failed_chunks import write_failed_chunks

        stores = self.stores
        await write_failed_chunks(stores.index_meta, failed[1], before=failed[0])
        removed = sorted(plan.removed_chunks)
        if removed:
            await stores.text_chunks.delete(removed)
            await stores.chunk_extractions.delete(removed)
            if stores.chunks_vdb is not None:
                await stores.chunks_vdb.delete(removed)
        if removed_doc_ids:
            await stores.full_docs.delete(removed_doc_ids)
        await stores.chunk_extractions.upsert({k: {"entities": v["entities"], "relations": v["relations"]}
                                               for k, v in extractions.items()})
        # A shared chunk whose recorded document is leaving now names one that stays.
        shared = sorted(plan.reassigned)
        leaving = set(removed_doc_ids)
        reassigned = {c: {**r, "full_doc_id": plan.reassigned[c]}
                      for c, r in zip(shared, await stores.text_chunks.get_by_ids(shared))
                      if r and r.get("full_doc_id") in leaving}
        await stores.text_chunks.upsert({**reassigned, **plan.refreshed, **plan.new_chunks})
        await stores.full_docs.upsert(docs)

    async def _extract(self, chunks: dict[str, ChunkRecord],
                       on_extracted: Optional[Callable[[str, ChunkExtraction], None]] = None
                       ) -> dict[str, ChunkExtraction]:
        if not chunks:
            return {}
        if self.config.extraction == "nlp":
            from graphrag.operators.nlp_extraction import extract_chunks_nlp

            return await asyncio.to_thread(extract_chunks_nlp, chunks)
        from graphrag.operators.extraction import ConversationLimit, extract_chunks

        self.windows.check_chunks_fit_extraction(max(chunk["tokens"] for chunk in chunks.values()))
        progress = Progress(len(chunks), "Extracting entities", self.config.show_progress)
        best, _ = self.llms

        def done(chunk_id: str, extraction: ChunkExtraction) -> None:
            progress.update()
            if on_extracted is not None:
                on_extracted(chunk_id, extraction)

        try:
            # Gleaning turns stop while the conversation still leaves ANSWER_TOKENS in the window.
            limit = ConversationLimit(self.config.best_model_max_token_size - ANSWER_TOKENS, self.tokenizer)
            fallback = None
            if self.config.extraction_fallback == "nlp":
                from graphrag.operators.nlp_extraction import extract_chunk_nlp

                fallback = extract_chunk_nlp
            return await extract_chunks(chunks, llm=best, entity_types=self.config.entity_types,
                                        max_gleaning=self.config.entity_extract_max_gleaning, on_done=done,
                                        limit=limit, fallback=fallback)
        finally:
            progress.close()

    async def _embed_chunks(self, new_chunks: dict[str, ChunkRecord]) -> None:
        if self.stores.chunks_vdb is not None and new_chunks:
            await self.stores.chunks_vdb.upsert({k: {"content": v["content"]} for k, v in new_chunks.items()})

    async def _report(self, schema: Optional[dict[str, Any]] = None, in_flight: Optional[Any] = None,
                      touched: Optional[set[str]] = None, only: Optional[set[str]] = None
                      ) -> tuple[int, int, FormatFailures]:
        """One report per community; unchanged communities keep theirs without an LLM call.
        Returns the number of communities, of reports generated, and the tally of answers that
        held no readable report. ``touched``: the nodes this write changed (their communities
        alone are read again). ``only``: the communities ``schema`` is limited to (every other
        community's report stays as it is, unread); None: ``schema`` has every community."""
        from graphrag.operators.community_index import (
            RECORD, communities_to_report, index_after, read_index, sizes_after)
        from graphrag.operators.community_reports import generate_community_reports
        from graphrag.operators.format_failures import FormatFailures

        stores = self.stores
        extractive = self.config.extraction == "nlp"
        all_keys = await stores.community_reports.all_keys()
        index = await read_index(stores.index_meta)
        schema, only = await communities_to_report(stores.graph, stores.community_reports, schema, only,
                                                   set(all_keys), index, extractive)
        sizes = sizes_after(index, schema, only)
        # A parent's report may be written from its sub-communities' reports.
        subs = {str(sub) for c in schema.values() for sub in c.get("sub_communities") or ()}
        read = all_keys if only is None else [k for k in all_keys if k in only or k in subs]
        existing = {k: v for k, v in zip(read, await stores.community_reports.get_by_ids(read)) if v}
        max_tokens = self.config.community_report_max_token_size if extractive else self.windows.report_data_tokens()
        progress = Progress(len(schema), "Community reports", self.config.show_progress)
        failures = FormatFailures("community reports")
        try:
            records, generated = await generate_community_reports(
                schema, graph=stores.graph, llm=None if extractive else self.llms[0], tokenizer=self.tokenizer,
                max_tokens=max_tokens, existing=existing,
                llm_kwargs=self.config.special_community_report_llm_kwargs, extractive=extractive,
                on_progress=progress.update, in_flight=in_flight, failures=failures, touched=touched,
            )
        finally:
            progress.close()
        failures.log(logger, "Extractive reports stand in for them until their community changes; "
                     "a stronger model writes the JSON.", self.config.extraction_failure_warning_share)
        stale = [k for k in existing if k not in records and (only is None or k in only)]
        await stores.community_reports.delete(stale)
        # Only what changed is written (a database store would otherwise rewrite every report).
        await stores.community_reports.upsert({k: v for k, v in records.items() if existing.get(k) != v})
        new_index = index_after(index, sizes, records, only)
        if stores.index_meta is not None and new_index != index:
            await stores.index_meta.upsert({RECORD: new_index.as_record()})
        communities = len(records) if only is None else len(set(all_keys) - set(stale) | set(records))
        logger.info("Communities: %d (%d reports generated, %d reused, %d removed)",
                    communities, generated, len(records) - generated, len(stale))
        return communities, generated, failures

    # ------------------------------------------------------------------ query

    @property
    def knowledge_graph(self) -> KnowledgeGraph:
        """The graph as an API (entity, neighbors, traverse, paths, subgraph, search,
        graph_search; see ``graphrag/graph_api.py``). ``self.stores.graph`` is the store it reads."""
        if self._knowledge_graph is None:
            from graphrag.graph_api import KnowledgeGraph

            self._knowledge_graph = KnowledgeGraph(lambda: self.stores, lambda: self._index_version, _run_sync)
        return self._knowledge_graph

    def _querying(self) -> QueryEngine:
        """What a query reads, handed to the answer policy (``graphrag/querying/``)."""
        from graphrag.querying import QueryEngine

        # The passage modes read the reranker from the stores (operators/rerank.py).
        self.stores.reranker = self._reranker()
        return QueryEngine(config=self.config, stores=self.stores, tokenizer=self.tokenizer, windows=self.windows,
                           graph=self.knowledge_graph, has_documents=self._has_documents,
                           best_llm=(lambda: self.llms[0]) if llm_configured(self.config) else None)

    def _reranker(self) -> Any:
        """The configured rerank stage (``GraphRAGConfig.rerank``), built once; None when off."""
        if self._built_reranker is None and self.config.rerank:
            from graphrag.rerank import build_reranker

            self._built_reranker = build_reranker(
                self.config.rerank, self.config.rerank_candidates, usage=self.usage,
                cache=self.stores.llm_response_cache, cheap_llm=lambda: self.llms[1], tokenizer=self.tokenizer,
                model=self.config.rerank_model, api_key=self.config.rerank_api_key)
        return self._built_reranker

    def retrieve(self, query: str, param: QueryParam = QueryParam()) -> Retrieval:
        return _run_sync(self.aretrieve(query, param))

    async def aretrieve(self, query: str, param: QueryParam = QueryParam()) -> Retrieval:
        """What ``param.mode`` retrieves for ``query`` as records (chunks, entities, relations,
        reports, each with its documents); ``.context`` is the ``only_need_context`` string.
        Nothing found (or nothing indexed): a Retrieval with no records and no context."""
        return await self._querying().retrieve(query, param)

    def query_result(self, query: str, param: QueryParam = QueryParam()) -> Answer:
        return _run_sync(self.aquery_result(query, param), self._close_llm_connections)

    async def aquery_result(self, query: str, param: QueryParam = QueryParam()) -> Answer:
        """The answer as an object citing its sources: ``.text`` cites ``[n]``, ``.references``
        maps each ``n`` kept to its documents, chunk or report and an excerpt. Without an LLM
        (or with ``only_need_context``) the text is the numbered context, every source listed."""
        return await self._querying().answer_result(query, param)

    def query(self, query: str, param: QueryParam = QueryParam()) -> str:
        return _run_sync(self.aquery(query, param), self._close_llm_connections)

    async def aquery(self, query: str, param: QueryParam = QueryParam()) -> str:
        return await self._querying().answer(query, param)

    async def aquery_stream(self, query: str, param: QueryParam = QueryParam()) -> AsyncIterator[str]:
        """The answer in pieces as the model writes them; a cached answer, a context
        (``only_need_context``, no LLM) or a canned reply comes as one piece."""
        async for piece in self._querying().stream(query, param):
            yield piece
