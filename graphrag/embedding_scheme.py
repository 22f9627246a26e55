"""The record of how an index's vectors were made, so one index never mixes pooled and
truncated chunk vectors, or vectors of two embedding models: their similarities to a
question are not comparable."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from graphrag.errors import EmbeddingSchemeError

if TYPE_CHECKING:
    from graphrag.storage.base import BaseKVStorage

logger = logging.getLogger(__name__)

# index_meta key: {"long_texts": "pooled" | "truncated"} for the bundled model,
# {"embedder": name} for a named one (``EmbeddingFunc.name``).
RECORD = "embedding"
BUNDLED = "the bundled all-MiniLM-L6-v2"


async def recorded_scheme(meta: Optional[BaseKVStorage], has_documents: bool) -> Optional[str]:
    """The scheme the index was built with; "truncated" for an index written before the
    record existed; None for an empty index (any scheme will do)."""
    record = await meta.get_by_id(RECORD) if meta is not None else None
    if isinstance(record, dict) and record.get("long_texts"):
        return str(record["long_texts"])
    return "truncated" if has_documents else None


def check_scheme(recorded: Optional[str], chosen: Optional[str], follows_index: bool) -> Optional[str]:
    """The scheme to index with: the chosen one, or the recorded one when the choice was the
    default (``follows_index``). Raises when the user explicitly chose the other one."""
    if chosen is None or recorded is None or recorded == chosen:
        return chosen
    if follows_index:
        logger.info("This index embeds long texts %s (recorded at its build); keeping that", recorded)
        return recorded
    raise EmbeddingSchemeError(
        f"this index's chunk vectors were built with local_embedding(long_texts={recorded!r}) but "
        f"local_embedding(long_texts={chosen!r}) was given; mixing them would make chunk similarities "
        f"incomparable. Open it with local_embedding(long_texts={recorded!r}) (or the default "
        "local_embedding()), or rebuild the index in a new working dir")


async def recorded_embedder(meta: Optional[BaseKVStorage]) -> Optional[str]:
    """The model that made the index's vectors, when recorded: a named one, or the bundled
    model (whose record holds only its long-text scheme); None for a user's function or an
    empty index."""
    record = await meta.get_by_id(RECORD) if meta is not None else None
    if not isinstance(record, dict):
        return None
    return record.get("embedder") or (BUNDLED if record.get("long_texts") else None)


def embedder_of(name: Optional[str], long_texts: Optional[str]) -> Optional[str]:
    """How an embedding function is recorded (see :func:`recorded_embedder`)."""
    return name or (BUNDLED if long_texts else None)


def check_embedder(recorded: Optional[str], chosen: Optional[str]) -> None:
    """Refuse to add vectors of one model to an index built by another."""
    if recorded is not None and chosen is not None and recorded != chosen:
        raise EmbeddingSchemeError(
            f"this index's vectors were made by {recorded}, but {chosen} is configured; vectors of two "
            "models cannot be compared. Configure the same embedder (embedding_base_url, embedding_model, "
            "embedding_dim) or build the index again in a new working dir")


async def record_scheme(meta: Optional[BaseKVStorage], scheme: Optional[str], name: Optional[str] = None) -> None:
    if meta is None or (scheme is None and name is None):
        return
    wanted = {k: v for k, v in (("long_texts", scheme), ("embedder", name)) if v is not None}
    if await meta.get_by_id(RECORD) != wanted:
        await meta.upsert({RECORD: wanted})
