"""The insert pipeline, as named stages with their inputs and outputs:

    chunk(new docs, removed doc ids)          -> documents to store, ChunkPlan
    extraction_work(plan)                     -> ExtractionWork (new chunks, failed ones to retry)
    extract(work)                             -> Extracted        beside: embed chunks, lexical counts,
                                                                  merge ahead, resolution's name lookups
    merge(extracted)                          -> GraphRebuild
    resolve(rebuilt)                          -> GraphRebuild     (entity_resolution=True)
    summarise(rebuilt)                        -> GraphChanges     beside: the descriptions' summaries
    record(documents, plan, extracted)
    cluster(changes)                          -> communities      beside: embed entities
    report(communities)                       -> reports          beside: write ahead the other stores

``Pipeline`` is the write object: built by ``GraphRAG`` inside a write (``indexing/scope.py``)
over the stores and clients of that write, and handed to whatever changes the index
(``indexing/documents.py``, ``indexing/entity_decisions.py``).
"""
from __future__ import annotations

import asyncio
import functools
import importlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Optional, Protocol, TypeVar

from graphrag.config import GraphRAGConfig, llm_configured
from graphrag.embedding import EmbeddingFunc, warn_if_not_english
from graphrag.failed_chunks import extraction_counts, failed_after, read_failed_chunks, write_failed_chunks
from graphrag.indexing.heap import FrozenHeap
from graphrag.indexing.index_meta import note_relation_vectors
from graphrag.indexing.reports import report_communities
from graphrag.progress import Progress
from graphrag.scheduling import BackgroundWork, StageTimer
from graphrag.schema import ChunkExtraction, ChunkRecord
from graphrag.stores import Stores
from graphrag.windows import ANSWER_TOKENS, ModelWindows

if TYPE_CHECKING:
    from graphrag.llm.client import LLMClient
    from graphrag.operators.community_reports import SummariesInFlight
    from graphrag.operators.documents import ChunkPlan
    from graphrag.operators.extraction import LLMCall
    from graphrag.operators.format_failures import FormatFailures
    from graphrag.operators.graph_update import GraphChanges, GraphRebuild, MergeAhead
    from graphrag.operators.resolution import EntityResolution
    from graphrag.operators.resolution.store import IndexedAhead, NamesLookedUp
    from graphrag.operators.tokenizer import Tokenizer
    from graphrag.rerank import SentenceVectors

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Stores that only the reports and the LLM cache change after clustering: written ahead
# while the reports are generated, leaving the commit less to do.
WRITTEN_BEFORE_REPORTS = ["full_docs", "text_chunks", "chunk_extractions", "lexical_index", "graph", "entities_vdb", "chunks_vdb",
                          "relations_vdb"]


class Clients(Protocol):
    """What a write uses of the engine (``GraphRAG``'s public members)."""

    config: GraphRAGConfig
    stores: Stores
    embedding_func: EmbeddingFunc

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def windows(self) -> ModelWindows: ...

    @property
    def llms(self) -> tuple[LLMClient, LLMClient]: ...


def without_marks(record: dict[str, Any]) -> dict[str, Any]:
    """A document record as stored: a reader's marks live on in its chunks' positions."""
    return {k: v for k, v in record.items() if k != "marks"}


@dataclass
class ExtractionWork:
    """The extract stage's input: ``to_extract`` (the new chunks and the failed ones retried);
    ``earlier``: the retried chunks' records before; ``removed``: the records of the chunks
    ``removed_chunks`` (those that had one);
    ``this_write``: the extractions that change something, filled as they arrive (merge and
    resolution read them before they are recorded)."""

    to_extract: dict[str, ChunkRecord]
    retried: dict[str, ChunkRecord]
    earlier: dict[str, ChunkExtraction]
    removed: dict[str, ChunkExtraction]
    removed_chunks: set[str]
    failed_before: dict[str, Any]
    this_write: dict[str, ChunkExtraction] = field(default_factory=dict)

    def unchanged(self, chunk_id: str, extraction: ChunkExtraction) -> bool:
        """A retried chunk that comes out as recorded changes nothing."""
        before = self.earlier.get(chunk_id, {"entities": [], "relations": []})
        return (chunk_id in self.retried and extraction["entities"] == before["entities"]
                and extraction["relations"] == before["relations"])


@dataclass
class Extracted:
    """The extract stage's output: every outcome, those that change something, their counts
    and warning, and the failed chunks left for a retry."""

    outcomes: dict[str, ChunkExtraction]
    changed: dict[str, ChunkExtraction]
    counts: dict[str, int]
    warning: Optional[str]
    failed: dict[str, Any]


class Pipeline:
    """The stages of a write over one set of stores (see the module docstring)."""

    def __init__(self, clients: Clients) -> None:
        self.config = clients.config
        self.stores = clients.stores
        self.embedding_func = clients.embedding_func
        self._clients = clients  # the tokenizer and LLM clients, loaded on first use

    @property
    def tokenizer(self) -> Tokenizer:
        return self._clients.tokenizer

    @property
    def windows(self) -> ModelWindows:
        return self._clients.windows

    def summarizer(self) -> Optional[LLMCall]:
        """The model that summarises descriptions (None: extractive, no LLM)."""
        if self.config.extraction != "llm":
            return None
        from graphrag.llm import in_language

        return in_language(self._clients.llms[1], self.config.output_language)

    def get_ready_to_extract(self) -> None:
        """Load the embedding model and open the LLM clients in the background, overlapping
        chunking (and, for the embedding model, extraction); then check every indexing
        prompt's window, so a window too small fails before any call is paid for."""
        warm_up = getattr(self.embedding_func.func, "warm_up", None)
        if warm_up is not None:
            loading = asyncio.create_task(asyncio.to_thread(warm_up))
            loading.add_done_callback(lambda t: t.cancelled() or t.exception())
        if self.config.extraction == "llm" and llm_configured(self.config):
            for client in set(self._clients.llms):
                client.warm_up()
        if self.config.extraction == "llm":
            self.windows.check_indexing()  # loads the tokenizer, so after the clients start building

    # ------------------------------------------------------------------ the whole write

    async def apply_changes(self, new_docs: dict[str, dict[str, Any]], removed_doc_ids: list[str],
                            retry_failed: bool = False, judge_pending: bool = False) -> dict[str, Any]:
        """Add ``new_docs`` and take out ``removed_doc_ids`` (an update does both), inside the
        caller's write; with ``retry_failed``, extract the chunks that failed before again;
        with ``judge_pending``, the resolution judge asks every pair left pending.
        What runs beside what is declared here and only here, beside each stage."""
        from graphrag.operators.graph_update import relation_vectors_to_catch_up, store_entity_vectors

        timer = StageTimer()
        relation_vectors_current = await note_relation_vectors(self.stores)
        with timer.stage("chunk"):
            docs_to_store, plan = await self.chunk(new_docs, removed_doc_ids)
        work = await self.extraction_work(plan, retry_failed)
        resolution = self.entity_resolution(plan.removed_chunks, work.this_write) if self.config.entity_resolution \
            else None
        aliases = await self.forget_or_read_aliases(resolution)
        # Chunk vectors need only the chunk text: embedded while the LLM extracts, from its first
        # answer on; until then the CPU goes to what the first requests wait for (chunking, the
        # LLM client's build).
        first_answer = asyncio.Event()
        if self.config.extraction != "llm" or not work.to_extract:
            first_answer.set()

        # The write's frozen heap (joined); what extraction and resolution leave is set aside too.
        with FrozenHeap() as heap:
            async with BackgroundWork(timer) as background:
                chunk_vectors = background.start(self.embed_chunks(plan.new_chunks), after=(first_answer,),
                                                 stage="embed")
                # The lexical index's counts need only the chunk text too (and, for a text in
                # Chinese script, jieba's dictionary, loaded meanwhile).
                terms = background.start(self.count_terms(plan.new_chunks), after=(first_answer,))
                # So do the sentence vectors the embedding rerank stage reads (after the chunk vectors).
                background.start(self.embed_sentences(plan), after=(chunk_vectors,), stage="embed")
                # Merge ahead: what is extracted so far is merged while the last calls are in flight.
                merge = self.merge_ahead(work, aliases, background)
                listeners = [merge.on_extracted]
                # Resolution's name lookups, as the names arrive, in a second process (a large write).
                # Offline extraction hands its names over all at once when it ends (``extract_chunks``
                # calls no listener), so such a process would only index and be closed: none is started.
                blocking = (resolution.blocking_ahead(len(work.to_extract))
                            if resolution is not None and self.config.extraction != "nlp" else None)
                looked_up = indexed = None
                if blocking is not None:
                    looked_up = background.start(blocking.run(), stage="resolve_ahead")
                    # ... and the pass's own blocking index and claims, in a thread as they arrive.
                    indexed = background.start(blocking.index())
                    listeners.append(blocking.on_extracted)
                with timer.stage("extract"):
                    extracted = await self.extract(work, listeners, first_answer)
                if blocking is not None:
                    blocking.all_in()
                heap.settle()
                with timer.stage("merge"):
                    rebuilt = await merge.finish(extracted.changed)
                resolved: dict[str, Any] = {}
                if resolution is not None:
                    with timer.stage("resolve"):
                        async def lookups_so_far() -> Optional[NamesLookedUp]:
                            # Asked for by the pass once its index is built: the process answers meanwhile.
                            if blocking is None or looked_up is None:
                                return None
                            blocking.close()
                            return await looked_up

                        async def indexed_so_far() -> Optional[IndexedAhead]:
                            return await indexed if indexed is not None else None

                        try:
                            rebuilt, resolved = await self.resolve(resolution, rebuilt, extracted.changed,
                                                                    work.removed, judge_pending, ahead=lookups_so_far,
                                                                    indexed=indexed_so_far)
                        finally:
                            if blocking is not None:
                                blocking.close()
                    heap.settle()
                with timer.stage("merge"):
                    # Descriptions are summarised in the background; what needs one waits for it.
                    changes = self.summarise(rebuilt, background)
                await self.record(docs_to_store, removed_doc_ids, plan, extracted.changed,
                                  (work.failed_before, extracted.failed), await terms)
                # Entity vectors wait for the summaries; nothing below needs them, so they are
                # embedded beside clustering and reports. Relation vectors go with them, the store
                # caught up here with relations written or deleted while they were off (unless the
                # last write kept them too).
                stores = self.stores
                entity_vectors = background.start(store_entity_vectors(
                    stores.entities_vdb, changes, stores.relations_vdb,
                    catch_up=None if relation_vectors_current else
                    lambda skip: relation_vectors_to_catch_up(stores.graph, stores.relations_vdb, self.tokenizer,
                                                              self.vector_tokens, skip)),
                    after=(chunk_vectors,), stage="embed")
                communities = len(await self.stores.community_reports.all_keys())
                reports_generated, report_failures = 0, None
                if changes.entities_changed:
                    with timer.stage("cluster"):
                        schema, changed_communities = await self.cluster(rebuilt)
                    # The stores the reports leave alone are written while the reports are generated.
                    background.start(self.stores.write_ahead(WRITTEN_BEFORE_REPORTS), after=(entity_vectors,),
                                     finish_on_error=True)
                    with timer.stage("report"):
                        # Communities containing a description still being summarised wait for it.
                        communities, reports_generated, report_failures = await self.report(
                            schema, changes, touched=rebuilt.touched, only=changed_communities)
                else:
                    logger.info("No entity or relation changed; community reports kept as they are")

        return {
            "documents_inserted": len(new_docs),
            "documents_removed": len(removed_doc_ids),
            "chunks_inserted": len(plan.new_chunks),
            "chunks_removed": len(plan.removed_chunks),
            "entities_changed": changes.entities_changed,
            "malformed_records_skipped": sum(e.get("malformed", 0) for e in extracted.outcomes.values()),
            "communities": communities,
            "reports_generated": reports_generated,
            "chunks_retried": len(work.retried),
            **extracted.counts,
            "chunks_waiting": len(extracted.failed),
            "reports_failed": report_failures.failed if report_failures else 0,
            "warnings": [w for w in (extracted.warning, report_failures and report_failures.warned) if w],
            "stage_seconds": timer.rounded(),
            **({"entity_resolution": resolved} if resolution is not None else {}),
        }

    # ------------------------------------------------------------------ the stages, in order

    async def chunk(self, new_docs: dict[str, dict[str, Any]], removed_doc_ids: list[str]
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
        docs_to_store = {k: {**without_marks(v), "chunk_ids": by_doc[k]} for k, v in new_docs.items()}
        return docs_to_store, plan_chunks(chunks, unknown, leaving, staying)

    async def extraction_work(self, plan: ChunkPlan, retry_failed: bool) -> ExtractionWork:
        """The new chunks, and (``retry_failed``) the stored chunks whose extraction failed
        before that this write keeps."""
        failed_before = await read_failed_chunks(self.stores.index_meta)
        retried: dict[str, ChunkRecord] = {}
        if retry_failed:
            ids = sorted(c for c in failed_before if c not in plan.removed_chunks and c not in plan.new_chunks)
            retried = {k: v for k, v in zip(ids, await self.stores.text_chunks.get_by_ids(ids)) if v}
        return ExtractionWork(
            to_extract={**plan.new_chunks, **retried}, retried=retried,
            # A retried chunk's record is replaced; one that comes out the same changes nothing.
            earlier=await self.recorded_extractions(sorted(retried)),
            removed=await self.recorded_extractions(sorted(plan.removed_chunks)), removed_chunks=plan.removed_chunks,
            failed_before=failed_before)

    async def forget_or_read_aliases(self, resolution: Optional[EntityResolution]) -> Optional[dict[str, str]]:
        """The names grouped by entity resolution; with it off, its derived state is dropped."""
        if resolution is not None:
            return await resolution.aliases()
        if self.stores.index_meta is not None:
            from graphrag.operators.resolution import forget_derived_state

            await forget_derived_state(self.stores.index_meta)
        return None

    def merge_ahead(self, work: ExtractionWork, aliases: Optional[dict[str, str]], background: BackgroundWork
                    ) -> MergeAhead:
        """The merge stage, started early once only the last extraction calls are in flight."""
        from graphrag.operators.graph_update import MergeAhead

        def start(first_pass: Coroutine[Any, Any, T]) -> "asyncio.Task[T]":
            # The report stage's code loads meanwhile (once a process): a first insert would
            # otherwise import it between the last extraction answer and the first report.
            background.start(asyncio.to_thread(importlib.import_module, "graphrag.operators.community_reports"))
            return background.start(first_pass, stage="merge_ahead")

        return MergeAhead(self.rebuild_pass(work.this_write, replaced=work.earlier, aliases=aliases),
                          removed=work.removed, expected=len(work.to_extract),
                          tail=max(1, self.config.best_model_max_async // 4), start=start, extracted=work.this_write)

    async def extract(self, work: ExtractionWork, listeners: list[Callable[[str, ChunkExtraction], None]],
                      first_answer: asyncio.Event) -> Extracted:
        """Extract ``work.to_extract``; each answer that changes something goes to ``listeners``
        (the merge ahead, resolution's blocking)."""
        def extracted(chunk_id: str, extraction: ChunkExtraction) -> None:
            first_answer.set()
            if not work.unchanged(chunk_id, extraction):
                for listener in listeners:
                    listener(chunk_id, extraction)

        outcomes = await self.extract_chunks(work.to_extract, extracted)
        first_answer.set()
        counts, warning = extraction_counts(outcomes, self.config.extraction_failure_warning_share)
        return Extracted(outcomes=outcomes, changed={k: v for k, v in outcomes.items() if not work.unchanged(k, v)},
                         counts=counts, warning=warning,
                         failed=failed_after(work.failed_before, outcomes, work.removed_chunks))

    async def extract_chunks(self, chunks: dict[str, ChunkRecord],
                             on_extracted: Optional[Callable[[str, ChunkExtraction], None]] = None
                             ) -> dict[str, ChunkExtraction]:
        if not chunks:
            return {}
        if self.config.extraction == "nlp":
            from graphrag.operators.nlp_extraction import extract_chunks_nlp

            return await asyncio.to_thread(extract_chunks_nlp, chunks,
                                           user_dictionary=self.config.nlp_user_dictionary)
        from graphrag.operators.extraction import ConversationLimit, extract_chunks

        self.windows.check_chunks_fit_extraction(max(chunk["tokens"] for chunk in chunks.values()))
        progress = Progress(len(chunks), "Extracting entities", self.config.show_progress)
        best, _ = self._clients.llms

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

                fallback = functools.partial(extract_chunk_nlp, user_dictionary=self.config.nlp_user_dictionary)
            return await extract_chunks(chunks, llm=best, entity_types=self.config.entity_types,
                                        max_gleaning=self.config.entity_extract_max_gleaning, on_done=done,
                                        limit=limit, fallback=fallback)
        finally:
            progress.close()

    async def resolve(self, resolution: EntityResolution, rebuilt: GraphRebuild, extracted: dict[str, ChunkExtraction],
                      removed: dict[str, ChunkExtraction], judge_pending: bool = False,
                      ahead: Optional[Callable[[], Awaitable[Optional[NamesLookedUp]]]] = None,
                      indexed: Optional[Callable[[], Awaitable[Optional[IndexedAhead]]]] = None
                      ) -> tuple[GraphRebuild, dict[str, Any]]:
        """Resolve the names the new and removed chunks mention (``ahead``: gives the names
        looked up as they arrived; ``indexed``: the blocking index and claims made as they
        arrived); rebuild the nodes whose names moved."""
        outcome = await resolution.resolve(extracted, removed, ask_all=judge_pending, ahead=ahead, indexed=indexed)
        moved = await resolution.moved_chunks(outcome)
        if moved:
            rebuild = self.rebuild_pass(extracted, aliases=outcome.state.aliases)
            rebuilt = rebuilt.then(await rebuild(moved, set(), previous_aliases=outcome.previous,
                                                 moved=None if outcome.unresolved else outcome.moved))
        return rebuilt, outcome.stats

    def summarise(self, rebuilt: GraphRebuild, background: BackgroundWork) -> GraphChanges:
        from graphrag.operators.graph_update import finish_graph_update

        return finish_graph_update(
            rebuilt, graph=self.stores.graph, summarizer=self.summarizer(), tokenizer=self.tokenizer,
            summary_max_tokens=self.config.entity_summary_to_max_tokens, vector_tokens=self.vector_tokens,
            start=background.start)

    @property
    def vector_tokens(self) -> int:
        """The tokens of an entity's or relation's text that are embedded: it is found by its
        name and the start of its description; embedding more than half the model's window
        costs compute (quadratic in length) for little gain."""
        return max(self.embedding_func.max_token_size // 2, 32)

    async def record(self, docs: dict[str, dict[str, Any]], removed_doc_ids: list[str], plan: ChunkPlan,
                     extractions: dict[str, ChunkExtraction], failed: tuple[dict[str, Any], dict[str, Any]],
                     terms: Optional[dict[str, dict[str, int]]] = None) -> None:
        """Every document, chunk and extraction record the write adds or removes, and the
        failed chunks (before, after) kept for a retry, in one place (``terms``: the new
        chunks' lexical counts, made beforehand)."""
        stores = self.stores
        await write_failed_chunks(stores.index_meta, failed[1], before=failed[0])
        removed = sorted(plan.removed_chunks)
        if removed:
            await stores.text_chunks.delete(removed)
            await stores.chunk_extractions.delete(removed)
            if stores.chunks_vdb is not None:
                await stores.chunks_vdb.delete(removed)
            await self.sentence_vectors().delete(removed)
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
        if stores.lexical_index is not None:
            from graphrag.operators.lexical import update_lexical_index

            await update_lexical_index(stores.lexical_index, stores.text_chunks, plan.new_chunks, removed,
                                       self.config.nlp_user_dictionary, counted_before=terms)
        await stores.full_docs.upsert(docs)

    async def embed_chunks(self, new_chunks: dict[str, ChunkRecord]) -> None:
        if self.stores.chunks_vdb is not None and new_chunks:
            warn_if_not_english([v["content"] for v in new_chunks.values()], self.embedding_func)
            await self.stores.chunks_vdb.upsert({k: {"content": v["content"]} for k, v in new_chunks.items()})

    def sentence_vectors(self) -> SentenceVectors:
        from graphrag.rerank import SentenceVectors, embedding_model_name

        return SentenceVectors(lambda: self.stores.sentence_vectors, embedding_model_name(self.embedding_func))

    async def embed_sentences(self, plan: ChunkPlan) -> None:
        """The new chunks' sentence vectors, kept for the embedding rerank stage when it is
        configured, and the store caught up with the chunks written or deleted while it was not."""
        kept = self.sentence_vectors()
        old = await kept.catch_up(self.stores.text_chunks, skip=set(plan.new_chunks) | plan.removed_chunks)
        await kept.write(self.embedding_func, {**old, **{k: v["content"] for k, v in plan.new_chunks.items()}})

    async def count_terms(self, new_chunks: dict[str, ChunkRecord]) -> Optional[dict[str, dict[str, int]]]:
        """The new chunks' lexical counts (None: the lexical channel is off)."""
        if self.stores.lexical_index is None or not new_chunks:
            return None
        from graphrag.operators.lexical import count_terms

        return await asyncio.to_thread(count_terms, new_chunks, self.config.nlp_user_dictionary)

    async def cluster(self, rebuilt: GraphRebuild) -> tuple[dict[str, Any], Optional[set[str]]]:
        """The communities that may have changed (their schema) and which those are."""
        from graphrag.operators.clustering import cluster_after_write

        return await cluster_after_write(self.stores.graph, rebuilt.touched, rebuilt.were_in,
                                         self.config.graph_cluster_algorithm)

    async def report(self, schema: Optional[dict[str, Any]] = None, in_flight: Optional[SummariesInFlight] = None,
                     touched: Optional[set[str]] = None, only: Optional[set[str]] = None
                     ) -> tuple[int, int, FormatFailures]:
        """See ``indexing.reports.report_communities``."""
        if self.config.extraction == "nlp":
            llm, max_tokens = None, self.config.community_report_max_token_size
        else:
            from graphrag.llm import in_language

            llm = in_language(self._clients.llms[0], self.config.output_language)
            max_tokens = self.windows.report_data_tokens()
        return await report_communities(self.stores, self.config, self.tokenizer, llm, max_tokens,
                                        schema, in_flight, touched, only)

    # ------------------------------------------------------------------ what the stages read

    async def recorded_extractions(self, chunk_ids: list[str], also: Optional[dict[str, ChunkExtraction]] = None
                                   ) -> dict[str, ChunkExtraction]:
        """What extraction found in ``chunk_ids`` (those it has a record of): this write's
        from ``also``, the others as recorded."""
        also = also or {}
        to_read = [c for c in chunk_ids if c not in also]
        found = {k: v for k, v in zip(to_read, await self.stores.chunk_extractions.get_by_ids(to_read)) if v}
        return {**{c: also[c] for c in chunk_ids if c in also}, **found}

    def rebuild_pass(self, this_write: dict[str, ChunkExtraction],
                     replaced: Optional[dict[str, ChunkExtraction]] = None,
                     aliases: Optional[dict[str, str]] = None) -> Callable[..., Awaitable[GraphRebuild]]:
        """One merge pass: rebuild, in the graph, what the changed extractions touch, reading
        ``this_write``'s extractions before they are recorded (``replaced``: the earlier
        records of chunks extracted again; names grouped through ``aliases`` with entity
        resolution on)."""
        from graphrag.operators.graph_update import rebuild_graph

        summary_input_tokens = self.windows.summary_input_tokens() if self.config.extraction == "llm" else None

        async def read_list(ids: list[str]) -> list[Optional[ChunkExtraction]]:
            found = await self.recorded_extractions(ids, also=this_write)
            return [found.get(i) for i in ids]

        async def rebuild(changed: dict[str, ChunkExtraction], removed_chunks: set[str],
                          previous_aliases: Optional[dict[str, str]] = None, moved: Optional[set[str]] = None
                          ) -> GraphRebuild:
            return await rebuild_graph(changed, removed_chunks, graph=self.stores.graph, read_extractions=read_list,
                                       tokenizer=self.tokenizer,
                                       summary_max_tokens=self.config.entity_summary_to_max_tokens,
                                       summary_input_tokens=summary_input_tokens, replaced=replaced,
                                       aliases=aliases, previous_aliases=previous_aliases, moved=moved)

        return rebuild

    def entity_resolution(self, removed_chunks: set[str], this_write: dict[str, ChunkExtraction]
                          ) -> EntityResolution:
        """The resolution stage over this write's stores; it reads ``this_write``'s extractions
        before they are recorded."""
        from graphrag.operators.resolution import EntityResolution, ResolutionSettings

        async def read(ids: list[str]) -> list[Optional[ChunkExtraction]]:
            found = await self.recorded_extractions(ids, also=this_write)
            return [found.get(i) for i in ids]

        async def all_chunk_ids() -> list[str]:
            recorded = await self.stores.chunk_extractions.all_keys()
            return sorted((set(recorded) - removed_chunks) | set(this_write))

        check = (self.config.entity_resolution_llm_check and self.config.extraction == "llm"
                 and llm_configured(self.config))
        similar = self.config.entity_resolution_embedding_threshold
        meta = self.stores.index_meta
        assert meta is not None  # every working dir's stores open one; resolution keeps its records there
        return EntityResolution(graph=self.stores.graph, meta=meta, read_extractions=read,
                                all_chunk_ids=all_chunk_ids, llm=self._clients.llms[1] if check else None,
                                embed=self.embedding_func if similar is not None else None,
                                settings=ResolutionSettings(threshold=self.config.entity_resolution_threshold,
                                                            embedding_threshold=similar or 0.0))
