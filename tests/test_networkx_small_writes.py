"""The NetworkX store answers a small write's membership and neighbourhood reads from what it
keeps in memory; the answers equal the graph contract's defaults, before and after updates."""
from __future__ import annotations

import json
import random

from helpers_storage import graph, run

from graphrag.storage.capabilities import ClusterMemberships


def memberships(path: list[int]) -> str:
    return json.dumps([{"level": i, "cluster": c} for i, c in enumerate(path)])


def test_membership_and_edge_reads_match_the_contract_defaults_across_updates(config):
    rng = random.Random(7)

    async def main():
        store = graph(config)
        nodes = [f"N{i}" for i in range(60)]
        for node in nodes:
            await store.upsert_node(node, {"source_id": "c", "clusters": memberships([rng.randrange(4), 10 + rng.randrange(6)])})
        for _ in range(150):
            a, b = rng.sample(nodes, 2)
            await store.upsert_edge(a, b, {"weight": 1.0, "description": "d"})

        async def same_as_defaults() -> None:
            for ids in ([0], [1, 12], [13, 14, 15], [99]):
                expected = {n for n, d in await ClusterMemberships.nodes_in_clusters(store, ids)
                            if set(ids) & {c["cluster"] for c in json.loads(d["clusters"])}}
                got = {n for n, d in await store.nodes_in_clusters(ids)
                       if set(ids) & {c["cluster"] for c in json.loads(d["clusters"])}}
                assert got == expected
            # The highest community id, as every node's memberships read whole name it.
            named = [max(c["cluster"] for c in json.loads(d["clusters"]))
                     for _, d in await store.get_nodes_attributes(("clusters",)) if d.get("clusters")]
            top = await store.node_with_highest_cluster()
            assert top is not None and [max(c["cluster"] for c in json.loads(d["clusters"])) for _, d in top] == [
                max(named)]
            some = rng.sample(nodes, 8) + ["MISSING"]
            assert await store.get_edges_at(some, ("weight",)) == await ClusterMemberships.get_edges_at(
                store, some, ("weight",))

        await same_as_defaults()  # builds the community -> members map
        moved = {n: memberships([rng.randrange(4), 10 + rng.randrange(6)]) for n in rng.sample(nodes, 10)}
        moved.update({n: "" for n in rng.sample(nodes, 3)})
        await store.update_node_clusters(moved)
        await store.upsert_node("NEW", {"clusters": memberships([3, 16])})  # a new highest id...
        await same_as_defaults()
        await store.update_node_clusters({"NEW": memberships([3, 15])})  # ...gone again: its entry is stale
        await store.delete_node(nodes[0])
        await same_as_defaults()
        await store.upsert_node("BAD", {"clusters": "not json"})
        assert await store.node_with_highest_cluster() is None  # the caller reads every membership then
        assert "NEW" in {n for n, _ in await store.nodes_in_clusters([15])}
        assert nodes[0] not in {n for n, _ in await store.nodes_in_clusters(list(range(4)) + list(range(10, 16)))}

    run(main())
