"""Small helpers shared by the storage test files."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import graphrag.storage.files as files
from graphrag.config import GraphRAGConfig
from graphrag.storage import JsonKVStorage, NetworkXStorage, commit_transaction


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def graph_shape(rag: Any) -> tuple[set[str], set[tuple[str, str]]]:
    """The node names and undirected edges of ``rag``'s graph (its stores closed after)."""
    graph = rag.stores.graph
    nodes = {n for n, _ in await graph.get_all_nodes()}
    edges = {tuple(sorted((a, b))) for a, b, _ in await graph.get_all_edges()}
    await rag.stores.close()
    return nodes, edges  # type: ignore[return-value]


def kv(config: GraphRAGConfig, namespace: str = "docs", **kw: Any) -> JsonKVStorage:
    return JsonKVStorage(namespace=namespace, global_config=config, **kw)


def graph(config: GraphRAGConfig, namespace: str = "chunk_entity_relation") -> NetworkXStorage:
    return NetworkXStorage(namespace=namespace, global_config=config)


def committed(store: Any, directory: Any) -> None:
    """Commit ``store``'s changes, as an insert's transaction does."""
    with commit_transaction(str(directory)):
        run(store.index_done_callback())


def commit_killed_mid_append(store: Any, directory: Any, monkeypatch: Any, torn: bytes) -> None:
    """Commit ``store``'s changes with the process dying once the manifest is written, in the
    middle of the journal appends: each appended journal ends in ``torn``."""

    def killed(appends: list[tuple[str, str, int]]) -> None:
        for _, final, offset in appends:
            with open(final, "r+b") as f:
                f.truncate(offset)
                f.seek(offset)
                f.write(torn)
        raise KeyboardInterrupt  # stands in for the kill

    monkeypatch.setattr(files, "_apply_appends", killed)
    with pytest.raises(KeyboardInterrupt):
        committed(store, directory)
    monkeypatch.undo()


def run_journaling_writer(working_dir: Any, then: str) -> str:
    """Run, in a process of its own, a writer whose every store journals (whatever its file's
    size, never folding by share) inserting two documents, then the code ``then`` (``rag`` is
    the instance); returns what the process printed."""
    script = textwrap.dedent(f"""
        import graphrag.storage.journal as commit_journal
        commit_journal.JOURNAL_FROM_BYTES, commit_journal.FOLD_AT_SHARE = 0, 1000.0
        from graphrag import GraphRAG, hash_embedding
        rag = GraphRAG(working_dir={str(working_dir)!r}, embedding_func=hash_embedding(32), extraction="nlp",
                       show_progress=False)
        rag.insert("Ada Lovelace wrote the first program for the Analytical Engine in London.")
        rag.insert("Charles Babbage designed the Analytical Engine in London.")
    """) + textwrap.dedent(then)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout
