"""One write's scope: the writer lock, the recovery of a commit a killed writer left, the
embedding scheme the index keeps, and the transaction every store commits in.

Every insert or delete runs under the working dir's writer lock and commits all stores in
one transaction (see ``storage/files.py``), so a killed run leaves the previous state, and
re-running it finishes the job with the LLM answers already paid for served from the
response cache journal.
"""
from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import AsyncIterator, Awaitable, Callable, Optional

from graphrag.config import GraphRAGConfig
from graphrag.embedding import EmbeddingFunc, follows_index, limited, local_embedding
from graphrag.errors import StoreUnavailableError
from graphrag.embedding_scheme import check_embedder, check_scheme, embedder_of, recorded_embedder, recorded_scheme
from graphrag.indexing.index_meta import has_documents
from graphrag.locking import try_lock
from graphrag.stores import Stores

logger = logging.getLogger(__name__)


def recover_if_possible(config: GraphRAGConfig, stores: Stores) -> None:
    """Finish a commit a killed writer left (or drop its temp files), if no writer is active;
    else wait for it."""
    if not stores.needs_recovery():
        return
    lock = try_lock(config.working_dir)
    if lock is None:
        stores.wait_for_commit()
        return
    try:
        stores.recover()
    except StoreUnavailableError as err:
        # Opening must work while a database is down (queries then answer around it); the
        # next write recovers under its lock before it changes anything.
        logger.warning("An interrupted commit waits for recovery until its store is back: %s", err)
    finally:
        lock.release()


async def embedding_for_index(config: GraphRAGConfig, stores: Stores, embedding_func: EmbeddingFunc
                              ) -> Optional[EmbeddingFunc]:
    """The embedding function with the long-text scheme the index was built with, when
    ``embedding_func`` has the other one by default (None: keep it); refuses an explicit
    other one, so chunk vectors of one index stay comparable."""
    check_embedder(await recorded_embedder(stores.index_meta), embedder_of(embedding_func.name, embedding_func.long_texts))
    recorded = await recorded_scheme(stores.index_meta, await has_documents(stores))
    scheme = check_scheme(recorded, embedding_func.long_texts, follows_index(config.embedding_func))
    if scheme == embedding_func.long_texts:
        return None
    return limited(local_embedding(scheme), config.embedding_func_max_async)


@asynccontextmanager
async def committing(stores: Stores, every_store: bool, before_commit: Callable[[], Awaitable[None]]
                     ) -> AsyncIterator[None]:
    """Make everything the block writes visible together at its end, or none of it if it raises.

    Open for the whole write, so stores finished early can be written ahead
    (``Stores.write_ahead``); nothing becomes visible before the end. A database store
    takes its writer lock in ``index_start``, so that is inside too. ``every_store=False``
    opens only the documents and ``index_meta`` (enough to tell whether there is work); the
    block opens the rest with ``stores.index_start()``.
    """
    async with stores.transaction():
        await stores.index_start(None if every_store else ["full_docs", "index_meta"])
        yield
        await before_commit()
        await stores.index_done()
