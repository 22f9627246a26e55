"""An insert or delete reads again only what it touched, and ends exactly where reading everything does.

Two indexes take the same random sequence of inserts and deletes: one as the pipeline runs
(the report stage told which nodes the write touched), the other with that knowledge withheld,
so every community is read and fingerprinted. After each step their memberships and reports
must be identical, on files and on PostgreSQL (which writes only the memberships that changed).
"""
from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from graphrag import GraphRAG, hash_embedding
from graphrag.operators import community_reports
from graphrag.operators.chunking import doc_id_for
from graphrag.operators.graph_update import GraphRebuild

fingerprint = community_reports.community_fingerprint

PEOPLE = ["Marin Okafor", "Jonas Velt", "Oriel Banks", "Priya Sandoval", "Teo Marsh", "Nadia Farrow",
          "Ilse Brandt", "Kofi Mensah", "Lena Duarte", "Ravi Kumar", "Sofia Lind", "Abel Quint"]
PLACES = ["Port Halden", "Brightwater", "Greystone Ridge", "Lumen Hall", "Crestfield University",
          "Tidewater Labs", "Ashgrove Orchestra", "Kestrel Reserve"]
ALL_POSTGRES = {"kv_storage": "postgres", "vector_storage": "pgvector", "graph_storage": "postgres"}


def _documents(seed: int, count: int) -> list[str]:
    """Short documents over shared names, so components grow, merge and split as they come and go."""
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        sentences = []
        for _ in range(rng.randint(2, 4)):
            a, b = rng.sample(PEOPLE, 2)
            sentences.append(f"{a} met {b} at {rng.choice(PLACES)}.")
        sentences.append(f"Document {i} was written by {rng.choice(PEOPLE)}.")
        docs.append(" ".join(sentences))
    return docs


def _state(rag: GraphRAG) -> tuple[dict[str, Any], dict[str, Any]]:
    async def read():
        stores = rag.stores
        nodes = await stores.graph.get_nodes_attributes(("clusters",))
        keys = await stores.community_reports.all_keys()
        reports = dict(zip(keys, await stores.community_reports.get_by_ids(keys)))
        return {n: d.get("clusters") or "" for n, d in nodes}, reports

    return asyncio.run(read())


@pytest.mark.parametrize("mode,backend", [("nlp", "files"), ("llm", "files"), ("nlp", "postgres")])
@pytest.mark.parametrize("seed", [1, 2])
def test_touched_only_equals_everything_read(mode, backend, seed, tmp_path, server, request, monkeypatch):
    def make(name: str) -> GraphRAG:
        settings: dict[str, Any] = dict(working_dir=str(tmp_path / name), embedding_func=hash_embedding(64),
                                        extraction=mode, show_progress=False, exact_clustering_below=6,
                                        max_graph_cluster_size=4)
        if mode == "llm":
            settings.update(llm_base_url=server.base_url, llm_api_key="k")
        if backend == "postgres":
            options = request.getfixturevalue("postgres_options")
            settings.update(ALL_POSTGRES, storage_options={**options, "workspace": f"{options['workspace']}_{name}"})
        return GraphRAG(**settings)

    restricted, everything = make("restricted"), make("everything")
    fingerprinted = {False: 0, True: 0}

    def apply(step) -> None:
        for rag, withheld in ((restricted, False), (everything, True)):
            with monkeypatch.context() as patch:
                if withheld:
                    patch.setattr(GraphRebuild, "touched", property(lambda self: None))

                def counted(*args, **kwargs):
                    fingerprinted[withheld] += 1
                    return fingerprint(*args, **kwargs)

                patch.setattr(community_reports, "community_fingerprint", counted)
                step(rag)

    rng = random.Random(seed)
    docs = _documents(seed, 14)
    present: list[str] = []
    apply(lambda rag: rag.insert(docs[:4]))
    present += docs[:4]
    waiting = docs[4:]
    for _ in range(7):
        if waiting and (not present or rng.random() < 0.6):
            new = [waiting.pop(0) for _ in range(min(len(waiting), rng.randint(1, 2)))]
            apply(lambda rag: rag.insert(new))
            present += new
        else:
            gone = rng.choice(present)
            present.remove(gone)
            apply(lambda rag: rag.delete_documents([doc_id_for(gone.strip())]))
        memberships, reports = _state(restricted)
        assert any(memberships.values()) and reports
        assert (memberships, reports) == _state(everything)
    # The restricted run did skip communities (else this test would compare a path with itself).
    assert 0 < fingerprinted[False] < fingerprinted[True]
