"""Facts as seeds for the hybrid walk: the relations whose vectors are nearest the question.

HippoRAG 2 matches a question to facts (triples), not only to entity names: a question that
paraphrases how two things are linked ("the father of ...", "the band of ...") names neither
end exactly, but reads like the relation's description. Each fact found puts restart mass
on both its ends, in proportion to its similarity, and scaled by each end's specificity
(1 / chunks mentioning it) as the name seeds are.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from .walk_graph import GraphIndex

if TYPE_CHECKING:
    from graphrag.storage.base import BaseVectorStorage

logger = logging.getLogger(__name__)


async def fact_seed(question: str, relations_vdb: Optional[BaseVectorStorage], index: GraphIndex, top_k: int
                    ) -> dict[int, float]:
    """Entity positions in ``index`` with their seed weight from the ``top_k`` facts nearest
    ``question``; empty without relation vectors (an index built before they were kept)."""
    if relations_vdb is None or top_k <= 0:
        return {}
    hits = await relations_vdb.query(question, top_k=top_k)
    weights: dict[int, float] = {}
    for hit in hits:
        similarity = max(float(hit.get("distance", 0.0)), 0.0)
        for end in (hit.get("src_id"), hit.get("tgt_id")):
            at = index.entity_position(end) if end else None
            if at is not None:
                weights[at] = weights.get(at, 0.0) + similarity * float(index.specificity[at])
    return weights

