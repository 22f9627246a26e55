"""The indexing half of the engine, behind ``GraphRAG``'s insert, delete and entity-decision
methods.

- ``scope``: one write -- the writer lock, recovery of a killed commit, the embedding scheme
  the index keeps, and the transaction every store commits in;
- ``index_meta``: the counts and LLM usage kept in ``index_meta``;
- ``pipeline``: ``Pipeline``, the write object: chunk -> extract -> merge -> resolve ->
  record -> cluster -> report, with embedding beside them;
- ``documents``: prepared documents in, each one's outcome (new, updated, unchanged, moved) out;
- ``entity_decisions``: merges and splits a person decides, applied through a ``Pipeline``.
"""
