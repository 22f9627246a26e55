"""Merge stage, store side: apply changed chunk extractions to the graph and entity vectors.

Every entity and relation a changed (new or removed) chunk mentions is rebuilt from the
recorded extractions of all chunks that still mention it. A node's data is therefore a
pure function of those extractions: the result does not depend on insertion order, and
deleting a document needs no new extraction call.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from graphrag.operators.chunking import compute_id
from graphrag.operators.extraction import LLMCall
from graphrag.operators.merge import Tokenizer, edge_key, group_contributions, merge_graph_records
from graphrag.schema import GRAPH_FIELD_SEP, ChunkExtraction

logger = logging.getLogger(__name__)


@dataclass
class GraphChanges:
    """What an update changed; entity vectors are left to the caller so embedding can
    run beside clustering and reports instead of before them."""

    entities_changed: int = 0
    vectors_to_upsert: dict[str, dict[str, Any]] = field(default_factory=dict)
    vectors_to_delete: list[str] = field(default_factory=list)


async def store_entity_vectors(entities_vdb: Any, changes: GraphChanges) -> None:
    if entities_vdb is not None:
        await entities_vdb.delete(changes.vectors_to_delete)
        await entities_vdb.upsert(changes.vectors_to_upsert)


def entity_vector_id(name: str) -> str:
    return compute_id(name, "ent-")


def _split_ids(value: Any) -> list[str]:
    return [v for v in str(value or "").split(GRAPH_FIELD_SEP) if v]


async def update_graph(
    changed_extractions: dict[str, ChunkExtraction],
    removed_chunks: set[str],
    *,
    stores: Any,
    summarizer: Optional[LLMCall],
    tokenizer: Tokenizer,
    summary_max_tokens: int,
    vector_tokens: int,
) -> GraphChanges:
    """Rebuild what ``changed_extractions`` mention in the graph; return the vector work.

    ``changed_extractions`` holds the extractions of new chunks (already stored) and of
    ``removed_chunks`` (already deleted). With no ``summarizer`` (LLM-free mode) long
    descriptions are cut to ``summary_max_tokens`` instead of summarised.
    """
    graph = stores.graph
    touched_ents, touched_rels = group_contributions(changed_extractions)
    names = sorted(set(touched_ents) | {n for key in touched_rels for n in key})
    if not names:
        return GraphChanges()
    old_nodes = dict(zip(names, await graph.get_nodes_batch(names)))
    # Every chunk that mentions a touched name is in that node's source_id, or is new.
    sources = {c for node in old_nodes.values() if node for c in _split_ids(node.get("source_id"))}
    sources = sorted((sources | set(changed_extractions)) - removed_chunks)
    current = {k: v for k, v in zip(sources, await stores.chunk_extractions.get_by_ids(sources)) if v}
    entity_contribs, relation_contribs = group_contributions(current)

    mentions: dict[str, set[str]] = defaultdict(set)
    endpoint_relations: dict[str, list] = defaultdict(list)
    for name, contribs in entity_contribs.items():
        mentions[name].update(c for c, _ in contribs)
    for key, contribs in relation_contribs.items():
        for end in key:
            mentions[end].update(c for c, _ in contribs)
            endpoint_relations[end].extend(contribs)
    # Only relations a changed chunk states can change; each has both endpoints in ``names``.
    edge_keys = sorted({edge_key(*k) for k in touched_rels})

    nodes, edges = await merge_graph_records(
        {n: entity_contribs[n] for n in names if n in entity_contribs},
        {k: relation_contribs[k] for k in edge_keys if k in relation_contribs},
        llm=summarizer, tokenizer=tokenizer,
        summary_max_tokens=summary_max_tokens if summarizer is not None else 10**12,
        endpoint_relations=endpoint_relations,
    )
    if summarizer is None:
        for data in [*nodes.values(), *edges.values()]:
            data["description"] = tokenizer.truncate(data["description"], summary_max_tokens)

    changed_vectors: dict[str, dict[str, Any]] = {}
    removed_vectors: list[str] = []
    for name in names:
        old = old_nodes.get(name)
        if name not in nodes or not mentions.get(name):
            if old is not None:
                await graph.delete_node(name)
                removed_vectors.append(entity_vector_id(name))
            continue
        data = nodes[name]
        data["source_id"] = GRAPH_FIELD_SEP.join(sorted(mentions[name]))
        await graph.upsert_node(name, data)
        if not old or old.get("description") != data["description"]:
            changed_vectors[entity_vector_id(name)] = {
                "content": tokenizer.truncate(f"{name} {data['description']}", vector_tokens),
                "entity_name": name,
            }
    for key in edge_keys:
        if key in edges and mentions.get(key[0]) and mentions.get(key[1]):
            await graph.upsert_edge(key[0], key[1], edges[key])
        else:
            await graph.delete_edge(*key)
    logger.info("Merged %d entities and %d relations (%d entities removed)",
                len(nodes), len(edges), len(removed_vectors))
    return GraphChanges(len(nodes) + len(removed_vectors), changed_vectors, removed_vectors)
