"""The engine: documents in, knowledge graph and community reports out, questions answered.

Reading order is the pipeline's: prepare documents -> chunk -> extract -> merge ->
cluster -> report -> commit. Every insert or delete runs under the working dir's
writer lock and commits all stores in one transaction (see ``storage/files.py``), so
a killed run leaves the previous state, and re-running it finishes the job with the
LLM answers already paid for served from the response cache journal.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import re
import time
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, NamedTuple, Optional, Union

from graphrag.config import GraphRAGConfig, check_no_nano_graphrag_only_options
from graphrag.embedding import EmbeddingFunc, limited, local_embedding
from graphrag.locking import try_lock, writer_lock
from graphrag.progress import Progress
from graphrag.query_param import QueryParam
from graphrag.schema import ChunkExtraction, ChunkRecord
from graphrag.stores import Stores, open_stores

if TYPE_CHECKING:
    from graphrag.operators.graph_update import GraphRebuild

logger = logging.getLogger(__name__)

NO_LLM_NOTE = (
    "[No LLM is configured (set OPENAI_API_KEY / OPENAI_BASE_URL or pass best_model_func); "
    "below is the retrieved context instead of an answer.]"
)

EMPTY_INDEX_MESSAGE = "No documents are indexed in {working_dir} yet: insert some before asking questions."

# Of the best model's window (``best_model_max_token_size``), the tokens kept free for the
# answer to a community report or query prompt (a JSON report runs ~500-1500); and the least
# room a prompt must leave for its data, in either model's window.
ANSWER_TOKENS = 2000
MIN_PROMPT_DATA_TOKENS = 128


def _run_sync(coro: Any, cleanup: Any = None) -> Any:
    """Thin sync wrapper; refuses politely inside a running loop (notebooks: use the a* methods).

    ``cleanup`` (a coroutine function) runs before the temporary loop closes, so HTTP
    connections opened on it are closed rather than left to the garbage collector.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        async def run_then_clean_up() -> Any:
            try:
                return await coro
            finally:
                if cleanup is not None:
                    await cleanup()

        return asyncio.run(run_then_clean_up())
    coro.close()
    raise RuntimeError("called a sync GraphRAG method inside a running event loop; await the async "
                       "version instead (ainsert, aquery, adelete_documents)")


def _clean_text(text: str) -> str:
    """Drop NULs and other control characters, and unencodable lone surrogates."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    return _CONTROL_CHARS.sub("", text)  # a regex: str.translate does a dict lookup per character


_CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def prepare_documents(docs: Union[str, Iterable[str]], sources: Optional[Iterable[Optional[str]]] = None
                      ) -> tuple[dict[str, dict[str, Any]], int]:
    """Validate and normalise input before anything is touched: ``({doc_id: record}, skipped)``."""
    from graphrag.operators.chunking import doc_id_for

    if isinstance(docs, (str, bytes)):
        docs = [docs]  # type: ignore[list-item]
    if docs is None:
        raise TypeError("insert() needs a string or a list of strings, got None")
    items = list(docs)
    source_list = list(sources) if sources is not None else [None] * len(items)
    if len(source_list) != len(items):
        raise ValueError(f"got {len(items)} documents but {len(source_list)} sources")
    for i, doc in enumerate(items):
        if isinstance(doc, bytes):
            raise TypeError(f"document {i} is bytes; decode it to str first (e.g. data.decode('utf-8'))")
        if not isinstance(doc, str):
            raise TypeError(f"document {i} is {type(doc).__name__}, expected str")
    out: dict[str, dict[str, Any]] = {}
    skipped = 0
    for doc, source in zip(items, source_list):
        content = _clean_text(doc).strip()
        if not content:
            skipped += 1
            continue
        record: dict[str, Any] = {"content": content}
        if source:
            record["source"] = str(source)
        out.setdefault(doc_id_for(content), record)
    if skipped:
        logger.warning("Skipped %d empty or whitespace-only document(s)", skipped)
    return out, skipped


def llm_configured(config: GraphRAGConfig) -> bool:
    return bool(config.best_model_func or config.llm_api_key or config.llm_base_url
                or os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


class _Rebuilt(NamedTuple):
    chunks: set[str]  # whose extractions it applied
    rebuilt: GraphRebuild


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
        self.last_insert_stats: Optional[dict[str, Any]] = None

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
    def llms(self) -> Any:
        """(best, cheap) LLM clients, built on first use so offline work never imports openai."""
        if self._llms is None:
            from graphrag.llm import build_llm_clients

            # Counting is looked up at use, so building the clients does not load the tokenizer.
            self._llms = build_llm_clients(self.config, self.usage, self.stores.llm_response_cache,
                                           lambda text: self.tokenizer.count(text))
        return self._llms

    def _warm_up_models(self) -> None:
        """Load the embedding model and open the LLM clients in the background, overlapping
        chunking (and, for the embedding model, extraction)."""
        warm_up = getattr(self.embedding_func.func, "warm_up", None)
        if warm_up is not None:
            loading = asyncio.create_task(asyncio.to_thread(warm_up))
            loading.add_done_callback(lambda t: t.cancelled() or t.exception())
        if self.config.extraction == "llm" and llm_configured(self.config):
            for client in set(self.llms):
                client.warm_up()

    async def _close_llm_connections(self) -> None:
        if self._llms is not None:
            for client in set(self._llms):
                await client.aclose()

    @asynccontextmanager
    async def _writing(self, every_store: bool = True) -> AsyncIterator[None]:
        """Lock, bring the stores up to date with disk, and commit all of them together or none.

        ``every_store=False`` opens only the documents and ``index_meta`` (enough to tell
        whether there is work); the caller opens the rest with ``stores.index_start()``.
        """
        wd = self.config.working_dir
        async with writer_lock(wd, self.config.lock_timeout):
            self.stores.recover()
            await self.stores.index_start(None if every_store else ["full_docs", "index_meta"])
            try:
                # Open for the whole write, so stores finished early can be written ahead
                # (``Stores.write_ahead``); nothing becomes visible before the end.
                with self.stores.transaction():
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
                "reports_generated": 0}

    # ------------------------------------------------------------------ insert

    def insert(self, docs: Union[str, list[str]], sources: Optional[list[Optional[str]]] = None) -> dict[str, Any]:
        return _run_sync(self.ainsert(docs, sources), self._close_llm_connections)

    async def ainsert(self, docs: Union[str, list[str]], sources: Optional[list[Optional[str]]] = None
                      ) -> dict[str, Any]:
        """Index documents; already indexed ones cost nothing. A document whose ``source``
        matches an indexed one with other content replaces it (an update)."""
        documents, skipped = prepare_documents(docs, sources)
        self.usage.reset()
        started = time.perf_counter()
        timings: dict[str, float] = {}
        async with self._writing(every_store=False):
            new_ids = await self.stores.full_docs.filter_keys(list(documents))
            new_docs = {k: v for k, v in documents.items() if k in new_ids}
            if new_docs:
                # The clients start building first: the window check loads the tokenizer.
                self._warm_up_models()
                if self.config.extraction == "llm":
                    # A model window too small fails here, before any call is paid for.
                    self._summary_room()
                    self._report_data_tokens()
            replaced = await self._superseded_documents(new_docs)
            if new_docs or replaced:
                await self.stores.index_start()
                summary = await self._apply_changes(new_docs, replaced, timings)
            else:
                summary = await self._nothing_changed()
        stats = {
            **summary,
            "documents_skipped_empty": skipped,
            "documents_already_indexed": len(documents) - len(new_docs),
            "seconds": round(time.perf_counter() - started, 3),
            "stage_seconds": {k: round(v, 3) for k, v in timings.items()},
            "llm": self.usage.snapshot(),
        }
        self.last_insert_stats = stats
        logger.info("Insert done: %s", {k: v for k, v in stats.items() if k != "llm"})
        logger.info("LLM usage by stage: %s", stats["llm"])
        return stats

    async def _superseded_documents(self, new_docs: dict[str, dict[str, Any]]) -> list[str]:
        sources = {d["source"] for d in new_docs.values() if d.get("source")}
        if not sources:
            return []
        keys = await self.stores.full_docs.all_keys()
        records = await self.stores.full_docs.get_by_ids(keys, fields={"source"})
        return [k for k, r in zip(keys, records) if r and r.get("source") in sources and k not in new_docs]

    # ------------------------------------------------------------------ delete

    def delete_documents(self, doc_ids: Union[str, list[str]]) -> dict[str, Any]:
        return _run_sync(self.adelete_documents(doc_ids), self._close_llm_connections)

    async def adelete_documents(self, doc_ids: Union[str, list[str]]) -> dict[str, Any]:
        """Remove documents and everything only they contributed; other sources' facts stay."""
        ids = [doc_ids] if isinstance(doc_ids, str) else list(dict.fromkeys(doc_ids))
        self.usage.reset()
        timings: dict[str, float] = {}
        async with self._writing():
            missing = await self.stores.full_docs.filter_keys(ids)
            if missing:
                raise KeyError(f"unknown document id(s): {', '.join(sorted(missing))} "
                               "(list them with list_documents() or `graphrag docs`)")
            summary = await self._apply_changes({}, ids, timings)
        return {**summary, "llm": self.usage.snapshot(), "stage_seconds": timings}

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
            communities, generated = await self._report()
        return {"communities": communities, "reports_generated": generated, "llm": self.usage.snapshot()}

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

    # ------------------------------------------------------------------ the pipeline

    async def _apply_changes(self, new_docs: dict[str, dict[str, Any]], removed_doc_ids: list[str],
                             timings: dict[str, float]) -> dict[str, Any]:
        stores = self.stores

        t = time.perf_counter()
        removed_chunks, kept_by = await self._chunks_only_in(removed_doc_ids)
        chunks, chunk_ids_by_doc = self._chunk({k: v["content"] for k, v in new_docs.items()})
        for doc_id in new_docs:
            new_docs[doc_id]["chunk_ids"] = chunk_ids_by_doc[doc_id]
        new_chunk_ids = await stores.text_chunks.filter_keys(list(chunks))
        new_chunks = {k: v for k, v in chunks.items() if k in new_chunk_ids}
        for chunk_id in removed_chunks & set(chunks):  # still used by an incoming document
            kept_by[chunk_id] = chunks[chunk_id]["full_doc_id"]
        removed_chunks -= set(chunks)
        await self._reassign_chunks(kept_by, set(removed_doc_ids))
        timings["chunk"] = time.perf_counter() - t

        # Chunk vectors need only the chunk text: they are embedded while the LLM extracts,
        # from its first extracted chunk on. Before that the CPU goes to what the first
        # requests wait for: chunking, the client's build (in a new process, its imports).
        extracting = asyncio.Event()
        if self.config.extraction != "llm":
            extracting.set()  # no requests to make way for
        chunk_vectors = asyncio.create_task(self._embed_chunks(new_chunks, timings, extracting))
        try:
            extractions, changes = await self._extract_and_merge(new_chunks, removed_chunks, removed_doc_ids,
                                                                 timings, extracting)
        except BaseException:
            chunk_vectors.cancel()
            await asyncio.gather(chunk_vectors, return_exceptions=True)
            raise
        extracting.set()  # no chunk to extract (a removal only, or every chunk known already)

        # Nothing below needs the entity vectors, so they are embedded beside clustering and
        # reports; clustering needs only the structure, so it runs while long descriptions
        # are summarised.
        embedding = asyncio.create_task(self._embed_entities(chunk_vectors, changes, timings))
        written_ahead: Optional[asyncio.Task] = None
        await stores.full_docs.upsert(new_docs)
        reports_generated = 0
        communities = len(await stores.community_reports.all_keys())
        try:
            if changes.entities_changed:
                t = time.perf_counter()
                await stores.graph.clustering(self.config.graph_cluster_algorithm)
                schema = await stores.graph.community_schema()
                timings["cluster"] = time.perf_counter() - t
                written_ahead = asyncio.create_task(self._write_ahead(embedding))
                t = time.perf_counter()
                # Communities containing a description still being summarised wait for it.
                communities, reports_generated = await self._report(schema, changes)
                timings["report"] = time.perf_counter() - t
            else:
                logger.info("No entity or relation changed; community reports kept as they are")
        except BaseException:
            embedding.cancel()
            # Not cancelled: a store being written ahead in a thread finishes first, so the
            # failed commit's clean-up finds its temporary file.
            await asyncio.gather(embedding, *[written_ahead] if written_ahead else [], return_exceptions=True)
            await changes.cancel()
            raise
        await embedding
        if written_ahead is not None:
            await written_ahead
        malformed = sum(e.get("malformed", 0) for e in extractions.values())
        return {
            "documents_inserted": len(new_docs),
            "documents_removed": len(removed_doc_ids),
            "chunks_inserted": len(new_chunks),
            "chunks_removed": len(removed_chunks),
            "entities_changed": changes.entities_changed,
            "malformed_records_skipped": malformed,
            "communities": communities,
            "reports_generated": reports_generated,
        }

    async def _extract_and_merge(self, new_chunks: dict[str, ChunkRecord], removed_chunks: set[str],
                                 removed_doc_ids: list[str], timings: dict[str, float],
                                 extracting: asyncio.Event) -> tuple[dict[str, ChunkExtraction], Any]:
        """Extract, then merge into the graph. Once only the last calls are in flight (the
        LLM slots would mostly idle), what is extracted so far is merged meanwhile; only the
        last chunks are left for after. Both passes rebuild what they touch from every
        extraction, so the graph is the same as one pass would make. ``extracting`` is set
        once the first chunk is extracted."""
        tail = max(1, self.config.best_model_max_async // 4)
        extracted: dict[str, ChunkExtraction] = {}
        merging_ahead: Optional[asyncio.Task] = None

        async def merge_ahead(so_far: dict[str, ChunkExtraction]) -> _Rebuilt:
            t = time.perf_counter()
            # The report stage's code loads meanwhile too (once a process): a first insert
            # would otherwise import it between the last extraction answer and the first report.
            rebuilt, _ = await asyncio.gather(
                self._rebuild(so_far, new_chunks, removed_chunks, removed_doc_ids),
                asyncio.to_thread(importlib.import_module, "graphrag.operators.community_reports"))
            timings["merge_ahead"] = time.perf_counter() - t
            return rebuilt

        def on_extracted(chunk_id: str, extraction: ChunkExtraction) -> None:
            nonlocal merging_ahead
            extracting.set()
            extracted[chunk_id] = extraction
            left = len(new_chunks) - len(extracted)
            if merging_ahead is None and left <= min(tail, len(extracted)):
                merging_ahead = asyncio.ensure_future(merge_ahead(dict(extracted)))

        try:
            t = time.perf_counter()
            extractions = await self._extract(new_chunks, on_extracted)
            timings["extract"] = time.perf_counter() - t
            t = time.perf_counter()
            if merging_ahead is None:
                rebuilt = (await self._rebuild(extractions, new_chunks, removed_chunks, removed_doc_ids)).rebuilt
            else:
                ahead = await merging_ahead
                rest = {k: v for k, v in extractions.items() if k not in ahead.chunks}
                rebuilt = ahead.rebuilt.then((await self._rebuild(rest, {}, set(), [])).rebuilt)
        except BaseException:
            if merging_ahead is not None:
                merging_ahead.cancel()
                await asyncio.gather(merging_ahead, return_exceptions=True)
            raise
        from graphrag.operators.graph_update import finish_graph_update

        changes = finish_graph_update(
            rebuilt, graph=self.stores.graph, summarizer=self.llms[1] if self.config.extraction == "llm" else None,
            tokenizer=self.tokenizer, summary_max_tokens=self.config.entity_summary_to_max_tokens,
            # An entity is found by its name and the start of its description; embedding more
            # than half the model's window costs compute (quadratic in length) for little gain.
            vector_tokens=max(self.embedding_func.max_token_size // 2, 32),
        )
        timings["merge"] = time.perf_counter() - t
        return extractions, changes

    async def _rebuild(self, extractions: dict[str, ChunkExtraction], new_chunks: dict[str, ChunkRecord],
                       removed_chunks: set[str], removed_doc_ids: list[str]) -> "_Rebuilt":
        """Record ``extractions`` (and ``new_chunks``), drop the removed chunks' records, and
        rebuild what they touch in the graph (long descriptions are summarised later)."""
        from graphrag.operators.graph_update import rebuild_graph

        stores = self.stores
        old_extractions = {k: v for k, v in zip(
            removed_chunks, await stores.chunk_extractions.get_by_ids(list(removed_chunks))) if v}
        if removed_chunks:
            await stores.text_chunks.delete(list(removed_chunks))
            await stores.chunk_extractions.delete(list(removed_chunks))
            if stores.chunks_vdb is not None:
                await stores.chunks_vdb.delete(list(removed_chunks))
        if removed_doc_ids:
            await stores.full_docs.delete(removed_doc_ids)
        await stores.chunk_extractions.upsert({k: {"entities": v["entities"], "relations": v["relations"]}
                                               for k, v in extractions.items()})
        await stores.text_chunks.upsert(new_chunks)
        rebuilt = await rebuild_graph(
            {**old_extractions, **extractions}, removed_chunks, stores=stores, tokenizer=self.tokenizer,
            summary_max_tokens=self.config.entity_summary_to_max_tokens,
            summary_input_tokens=self._summary_input_tokens() if self.config.extraction == "llm" else None)
        return _Rebuilt(set(extractions), rebuilt)

    async def _write_ahead(self, embedding: "asyncio.Task[None]") -> None:
        """Once clustered and embedded, only the reports and the LLM cache change: the other
        stores are written while the reports are generated, leaving the commit less to do."""
        await embedding
        await self.stores.write_ahead(["full_docs", "text_chunks", "chunk_extractions", "graph",
                                       "entities_vdb", "chunks_vdb"])

    async def _chunks_only_in(self, doc_ids: list[str]) -> tuple[set[str], dict[str, str]]:
        """Chunks of ``doc_ids`` that no other indexed document contains, and, for the
        others, one remaining document that does."""
        if not doc_ids:
            return set(), {}
        stores = self.stores
        doomed = {c for r in await stores.full_docs.get_by_ids(doc_ids, fields={"chunk_ids"}) if r
                  for c in r.get("chunk_ids", [])}
        leaving = set(doc_ids)
        others = [k for k in await stores.full_docs.all_keys() if k not in leaving]
        kept_by: dict[str, str] = {}
        for doc_id, record in zip(others, await stores.full_docs.get_by_ids(others, fields={"chunk_ids"})):
            for chunk_id in (record or {}).get("chunk_ids", []):
                if chunk_id in doomed:
                    doomed.discard(chunk_id)
                    kept_by[chunk_id] = doc_id
        return doomed, kept_by

    async def _reassign_chunks(self, kept_by: dict[str, str], leaving: set[str]) -> None:
        """A shared chunk whose recorded document is leaving now names one that stays."""
        ids = sorted(kept_by)
        updates = {}
        for chunk_id, record in zip(ids, await self.stores.text_chunks.get_by_ids(ids)):
            if record and record.get("full_doc_id") in leaving:
                updates[chunk_id] = {**record, "full_doc_id": kept_by[chunk_id]}
        await self.stores.text_chunks.upsert(updates)

    def _chunk(self, docs: dict[str, str]) -> tuple[dict[str, ChunkRecord], dict[str, list[str]]]:
        """All chunks, and each document's own chunk ids (documents can share a chunk, e.g. a
        common header, and each must keep it until the last of them is deleted)."""
        from graphrag.operators.chunking import chunk_by_tokens

        chunk_func = self.config.chunk_func or chunk_by_tokens
        chunks: dict[str, ChunkRecord] = {}
        by_doc: dict[str, list[str]] = {}
        for doc_id, text in docs.items():
            own = chunk_func({doc_id: text}, size=self.config.chunk_token_size,
                             overlap=self.config.chunk_overlap_token_size, tokenizer=self.tokenizer)
            by_doc[doc_id] = list(own)
            for chunk_id, record in own.items():
                chunks.setdefault(chunk_id, record)
        return chunks, by_doc

    async def _extract(self, chunks: dict[str, ChunkRecord],
                       on_extracted: Optional[Callable[[str, ChunkExtraction], None]] = None
                       ) -> dict[str, ChunkExtraction]:
        if not chunks:
            return {}
        if self.config.extraction == "nlp":
            from graphrag.operators.nlp_extraction import extract_chunks_nlp

            return await asyncio.to_thread(extract_chunks_nlp, chunks)
        from graphrag.operators.extraction import ConversationLimit, extract_chunks

        self._check_chunks_fit_extraction(max(chunk["tokens"] for chunk in chunks.values()))
        progress = Progress(len(chunks), "Extracting entities", self.config.show_progress)
        best, _ = self.llms

        def done(chunk_id: str, extraction: ChunkExtraction) -> None:
            progress.update()
            if on_extracted is not None:
                on_extracted(chunk_id, extraction)

        try:
            # Gleaning turns stop while the conversation still leaves ANSWER_TOKENS in the window.
            limit = ConversationLimit(self.config.best_model_max_token_size - ANSWER_TOKENS, self.tokenizer)
            return await extract_chunks(chunks, llm=best, entity_types=self.config.entity_types,
                                        max_gleaning=self.config.entity_extract_max_gleaning, on_done=done,
                                        limit=limit)
        finally:
            progress.close()

    async def _embed_chunks(self, new_chunks: dict[str, ChunkRecord], timings: dict[str, float],
                            after: asyncio.Event) -> None:
        if self.stores.chunks_vdb is None or not new_chunks:
            return
        await after.wait()
        t = time.perf_counter()
        await self.stores.chunks_vdb.upsert({k: {"content": v["content"]} for k, v in new_chunks.items()})
        timings["embed"] = timings.get("embed", 0.0) + time.perf_counter() - t

    async def _embed_entities(self, chunk_vectors: "asyncio.Task[None]", changes: Any,
                              timings: dict[str, float]) -> None:
        """After the chunk vectors (one task to await or cancel for both), and once the
        summaries in flight have settled."""
        from graphrag.operators.graph_update import store_entity_vectors

        await chunk_vectors
        t = time.perf_counter()
        await store_entity_vectors(self.stores.entities_vdb, changes)
        timings["embed"] = timings.get("embed", 0.0) + time.perf_counter() - t

    def _report_data_tokens(self) -> int:
        """Community data one report prompt carries: ``community_report_max_token_size``, or
        less where ``best_model_max_token_size`` leaves less room beside the prompt's own text
        and ``ANSWER_TOKENS`` kept for the answer."""
        room = self._room_in_window("best_model_max_token_size", "community_report", ANSWER_TOKENS,
                                    input_text="")
        return min(self.config.community_report_max_token_size, room)

    def _summary_input_tokens(self) -> int:
        """Descriptions one summary prompt carries: ``summary_input_budget``, or less where
        ``cheap_model_max_token_size`` leaves less room beside the prompt's own text (the
        entity's name aside) and the summary itself."""
        from graphrag.operators.merge import summary_input_budget

        return min(summary_input_budget(self.config.entity_summary_to_max_tokens), self._summary_room())

    def _summary_room(self) -> int:
        return self._room_in_window("cheap_model_max_token_size", "summarize_entity_descriptions",
                                    self.config.entity_summary_to_max_tokens, entity_name="", description_list="")

    def _room_in_window(self, window_option: str, template: str, answer_tokens: int, question: str = "",
                        **empty: str) -> int:
        from graphrag.prompts import room_for_data

        window = getattr(self.config, window_option)
        question_tokens = self.tokenizer.count(question) if question else 0
        room = room_for_data(self.tokenizer, template, window, answer_tokens + question_tokens, **empty)
        if room < MIN_PROMPT_DATA_TOKENS:
            asked = f", the question takes {question_tokens}" if question else ""
            raise ValueError(
                f"{window_option}={window} leaves {max(room, 0)} tokens for the data of a '{template}' prompt "
                f"(at least {MIN_PROMPT_DATA_TOKENS} needed; {answer_tokens} are kept for the answer{asked}): "
                "raise it to the model's context window")
        return room

    def _check_chunks_fit_extraction(self, longest_chunk: int) -> None:
        """An extraction prompt carries a whole chunk: one longer than the best model's window
        leaves beside the prompt's text fails here, before any call, not at the server."""
        room = self._room_in_window("best_model_max_token_size", "entity_extraction", 0,
                                    entity_types=", ".join(self.config.entity_types), input_text="")
        if longest_chunk > room:
            raise ValueError(
                f"best_model_max_token_size={self.config.best_model_max_token_size} leaves {room} tokens for a "
                f"chunk in an extraction prompt, but chunks run to {longest_chunk} tokens: lower chunk_token_size "
                f"(now {self.config.chunk_token_size}) or raise the window to the model's")

    def _query_param_in_window(self, query: str, param: QueryParam) -> QueryParam:
        """``param`` with context budgets no larger than ``best_model_max_token_size`` leaves
        beside each of its mode's prompts, the question and ``ANSWER_TOKENS``."""
        from graphrag.operators.query_context import EMPTY_PROMPT_DATA, MODE_PROMPTS, fit_to_room

        room = min(self._room_in_window("best_model_max_token_size", template, ANSWER_TOKENS, question=query,
                                        response_type=param.response_type, **EMPTY_PROMPT_DATA)
                   for template in MODE_PROMPTS[param.mode])
        return fit_to_room(param, room)

    async def _report(self, schema: Optional[dict[str, Any]] = None,
                      in_flight: Optional[Any] = None) -> tuple[int, int]:
        """One report per community; unchanged communities keep theirs without an LLM call."""
        from graphrag.operators.community_reports import generate_community_reports

        stores = self.stores
        if schema is None:
            schema = await stores.graph.community_schema()
        existing_keys = await stores.community_reports.all_keys()
        existing = {k: v for k, v in zip(existing_keys, await stores.community_reports.get_by_ids(existing_keys)) if v}
        extractive = self.config.extraction == "nlp"
        max_tokens = self.config.community_report_max_token_size if extractive else self._report_data_tokens()
        progress = Progress(len(schema), "Community reports", self.config.show_progress)
        try:
            records, generated = await generate_community_reports(
                schema, graph=stores.graph, llm=None if extractive else self.llms[0], tokenizer=self.tokenizer,
                max_tokens=max_tokens, existing=existing,
                llm_kwargs=self.config.special_community_report_llm_kwargs, extractive=extractive,
                on_progress=progress.update, in_flight=in_flight,
            )
        finally:
            progress.close()
        stale = [k for k in existing if k not in records]
        await stores.community_reports.delete(stale)
        await stores.community_reports.upsert(records)
        logger.info("Communities: %d (%d reports generated, %d reused, %d removed)",
                    len(records), generated, len(records) - generated, len(stale))
        return len(records), generated

    # ------------------------------------------------------------------ query

    def query(self, query: str, param: QueryParam = QueryParam()) -> str:
        return _run_sync(self.aquery(query, param), self._close_llm_connections)

    async def aquery(self, query: str, param: QueryParam = QueryParam()) -> str:
        from graphrag.operators.query_global import global_query
        from graphrag.operators.query_local import local_query
        from graphrag.operators.query_naive import naive_query

        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if not await self._has_documents():
            await self.stores.query_done()
            return EMPTY_INDEX_MESSAGE.format(working_dir=self.config.working_dir)
        no_llm = not param.only_need_context and not llm_configured(self.config)
        if no_llm:
            param = replace(param, only_need_context=True)
        runner = {"local": local_query, "global": global_query, "naive": naive_query}[param.mode]
        try:
            param = self._query_param_in_window(query, param)
            llm = None if param.only_need_context else self.llms[0]
            answer = await runner(query, self.stores, param, llm=llm, tokenizer=self.tokenizer)
        finally:
            await self.stores.query_done()
        return f"{NO_LLM_NOTE}\n\n{answer}" if no_llm else answer
