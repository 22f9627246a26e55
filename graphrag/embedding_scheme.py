"""The record of how an index's long texts (chunks) were embedded, so one index never mixes
pooled and truncated vectors: their similarities to a question are not comparable."""
from __future__ import annotations

import logging
from typing import Any, Optional

from graphrag.errors import EmbeddingSchemeError

logger = logging.getLogger(__name__)

RECORD = "embedding"  # index_meta key: {"long_texts": "pooled" | "truncated"}


async def recorded_scheme(meta: Any, has_documents: bool) -> Optional[str]:
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


async def record_scheme(meta: Any, scheme: Optional[str]) -> None:
    if meta is not None and scheme is not None:
        record = await meta.get_by_id(RECORD)
        if not (isinstance(record, dict) and record.get("long_texts") == scheme):
            await meta.upsert({RECORD: {"long_texts": scheme}})
