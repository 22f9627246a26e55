"""The engine's typed configuration.

Field names follow nano-graphrag's ``GraphRAG`` dataclass so that
``GraphRAG(working_dir=..., best_model_func=..., enable_naive_rag=...)`` ports unchanged.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Optional

from graphrag.errors import ConfigurationError

if TYPE_CHECKING:
    from graphrag.llm.model_func import ModelFunc


def _default_working_dir() -> str:
    return f"./graphrag_cache_{datetime.now().strftime('%Y-%m-%d-%H:%M:%S')}"


# nano-graphrag options this engine does not have, with what to do instead: a ported script
# gets that advice rather than a bare "unexpected keyword argument".
_OWN_MODEL_FUNC = "pass best_model_func/cheap_model_func calling your client (see examples/custom_llm.py)"
NANO_GRAPHRAG_ONLY_OPTIONS: dict[str, str] = {
    "using_azure_openai": _OWN_MODEL_FUNC + ", e.g. openai.AsyncAzureOpenAI",
    "using_amazon_bedrock": _OWN_MODEL_FUNC,
    "best_model_id": "the best model is named by best_model_name",
    "cheap_model_id": "the cheap model is named by cheap_model_name",
    "tokenizer_type": "tokens are counted with tiktoken, chosen by tiktoken_model_name",
    "huggingface_model_name": "tokens are counted with tiktoken, chosen by tiktoken_model_name",
    "node_embedding_algorithm": "node embeddings are not computed (no query used them in nano-graphrag either)",
    "node2vec_params": "node embeddings are not computed (no query used them in nano-graphrag either)",
    "entity_extraction_func": "extraction='llm' or 'nlp' chooses the extractor",
    "convert_response_to_json_func": "the engine parses model JSON itself, tolerantly",
}


def check_no_nano_graphrag_only_options(options: Iterable[str]) -> None:
    """Raise TypeError, with advice, for options only nano-graphrag has."""
    found = [name for name in options if name in NANO_GRAPHRAG_ONLY_OPTIONS]
    if found:
        raise TypeError("; ".join(f"{name} is a nano-graphrag option this engine does not have: "
                                  f"{NANO_GRAPHRAG_ONLY_OPTIONS[name]}" for name in found))


@dataclass
class GraphRAGConfig:
    working_dir: str = field(default_factory=_default_working_dir)
    always_create_working_dir: bool = True

    # What to build.
    enable_local: bool = True
    # Chunk vectors for naive queries; on by default so every mode works on any index.
    enable_naive_rag: bool = True
    # Relation (fact) vectors, from which the hybrid walk also restarts (HippoRAG 2's facts as
    # seeds). Off by default: on the LLM-free graph they cost about twice the rest of the
    # index's CPU and lowered hybrid recall (benchmarks/README.md, issue 35).
    enable_relation_vectors: bool = False
    # "llm": model-based extraction and reports; "nlp": deterministic, no LLM at all.
    extraction: Literal["llm", "nlp"] = "llm"

    # Tokenizer and chunking.
    tiktoken_model_name: str = "gpt-4o"
    # Optional replacement chunker: (docs: dict[doc_id, str], tokenizer, size, overlap) -> list[chunk dicts].
    chunk_func: Optional[Callable[..., list[dict]]] = None
    chunk_token_size: int = 1200
    chunk_overlap_token_size: int = 100

    # Extraction and merge.
    # A jieba user dictionary (``word [frequency] [tag]`` per line) for the LLM-free
    # extractor: its words are segmented whole and always become entities (domain terms
    # such as 线段树). None: jieba's bundled dictionary alone.
    nlp_user_dictionary: Optional[str] = None
    entity_types: list[str] = field(default_factory=lambda: ["organization", "person", "geo", "event"])
    entity_extract_max_gleaning: int = 1
    entity_summary_to_max_tokens: int = 500

    # The language of entity summaries and community reports (e.g. "Chinese"); None: the
    # language of the descriptions they are written from. Answers follow the question's.
    output_language: Optional[str] = None

    # Clustering.
    graph_cluster_algorithm: str = "leiden"
    max_graph_cluster_size: int = 10
    graph_cluster_seed: int = 0xDEADBEEF
    # Components this big are updated in place on insert/delete rather than re-clustered:
    # a fresh Leiden run on a large component reshuffles most of its communities (and
    # their reports). Smaller ones are always clustered from scratch. `GraphRAG.recluster()`
    # redoes everything from scratch.
    exact_clustering_below: int = 200

    # Community reports: the most context tokens one report prompt may carry.
    community_report_max_token_size: int = 12000
    special_community_report_llm_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"response_format": {"type": "json_object"}}
    )
    # A community that is a whole connected component of the graph (no relation leaves it) of
    # at most this many entities is reported from its own records, with no model call
    # (`extractive_report.py`): there is nothing for a model to summarise that the report does
    # not state. At 4 entities or fewer a component has at most 6 relations, so the report lists
    # every relation as a finding whatever the component's shape. 0: every community goes to
    # the model.
    small_component_max_entities: int = 4

    # Embeddings. None means the bundled local all-MiniLM-L6-v2 model, unless the fields
    # below name another (each falls back to its GRAPHRAG_EMBEDDING_* variable): a server
    # with an OpenAI-compatible /embeddings (base url, model and its vector size), or a
    # sentence-transformers model by name or path (model alone).
    embedding_func: Optional[Any] = None
    embedding_base_url: Optional[str] = None
    embedding_model: Optional[str] = None
    embedding_dim: Optional[int] = None
    embedding_api_key: Optional[str] = field(default=None, repr=False)
    embedding_batch_num: int = 32
    embedding_func_max_async: int = 16
    query_better_than_threshold: float = 0.2
    # The lexical channel: a BM25 index over chunks, kept beside the chunk vectors and fused
    # into naive and hybrid ranking (operators/lexical.py). It finds passages by the words
    # they share with the question, in languages the embedder does not know.
    lexical_retrieval: bool = True

    # LLMs. A *_model_func overrides the OpenAI-compatible client for that model.
    best_model_func: Optional[ModelFunc] = None
    best_model_name: str = "gpt-4o"
    best_model_max_token_size: int = 32768
    best_model_max_async: int = 16
    cheap_model_func: Optional[ModelFunc] = None
    cheap_model_name: str = "gpt-4o-mini"
    cheap_model_max_token_size: int = 32768
    cheap_model_max_async: int = 16
    # Calls in flight across both models together, on top of each one's own limit: for one
    # server (or one rate limit) serving both. None: only the per-model limits.
    llm_max_async_total: Optional[int] = None
    llm_base_url: Optional[str] = None  # falls back to OPENAI_BASE_URL
    llm_api_key: Optional[str] = field(default=None, repr=False)  # falls back to OPENAI_API_KEY
    llm_timeout: float = 180.0
    llm_max_retries: int = 6
    enable_llm_cache: bool = True

    # Rerank stage of the passage modes (naive, local's Sources, hybrid; off by default):
    # "cross-encoder:NAME_OR_PATH" (sentence-transformers, local files only), a rerank
    # endpoint's URL (TEI / Cohere / Jina shape), "llm" (listwise by the cheap model) or
    # "embedding" (the index's embedding model: headings the question names, best sentences).
    # The first rerank_candidates passages are reordered. With "embedding", inserts keep each
    # chunk's sentence vectors (the KV namespace "sentence_vectors", keeps_sentence_vectors).
    rerank: Optional[str] = None
    rerank_candidates: int = 20
    rerank_model: Optional[str] = None  # the model name an endpoint is asked for (Cohere, Jina)
    rerank_api_key: Optional[str] = field(default=None, repr=False)

    # Storage classes (None: the file-backed defaults) and their extra arguments.
    key_string_value_json_storage_cls: Optional[type] = None
    vector_db_storage_cls: Optional[type] = None
    vector_db_storage_cls_kwargs: dict[str, Any] = field(default_factory=dict)
    graph_storage_cls: Optional[type] = None

    # Writers wait this long for another process's insert to finish.
    lock_timeout: float = 600.0
    # None: progress bars when stderr is a terminal, log lines otherwise.
    show_progress: Optional[bool] = None
    addon_params: dict[str, Any] = field(default_factory=dict)

    # Database backends (see graphrag/backends.py): a store chosen by name ("json", "postgres";
    # "nano", "pgvector", "milvus"; "networkx", "postgres", "neo4j") when its *_storage_cls is
    # None, and its connection settings (dsn, workspace, uri, user, password...), which are
    # secrets: left out of the repr, never logged.
    kv_storage: Optional[str] = None
    vector_storage: Optional[str] = None
    graph_storage: Optional[str] = None
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    # Weak models (answers that ignore the extraction format). "nlp": chunks the model fails
    # on, even after the repair turn, get the LLM-free extractor's records (and stay listed
    # for a retry); None: they get none. An insert warns when more than this share of its
    # chunks (or of its community reports) fail.
    extraction_fallback: Optional[Literal["nlp"]] = None
    extraction_failure_warning_share: float = 0.2
    # Entity resolution: one node per thing whatever names the extractions gave it
    # (``ADA PENNICK``, ``PENNICK``, ``MRS. PENNICK``). False: names merge only when equal.
    entity_resolution: bool = True
    # A pair merges at this evidence score (name relation plus evidence, up to ~1.6); higher
    # misses more merges and makes fewer wrong ones.
    entity_resolution_threshold: float = 0.7
    # Ask the cheap model about pairs the evidence leaves ambiguous (batched, cached so a
    # re-insert asks nothing, at most 5% of a write's extraction calls). None: on with LLM
    # extraction, off offline.
    entity_resolution_llm_check: Optional[bool] = None
    # Embedding blocking: also compare names whose embedded name-plus-description vectors are
    # this close (cosine; None: off). Costs an embedding per name; see benchmarks/README.md.
    entity_resolution_embedding_threshold: Optional[float] = None

    def __post_init__(self) -> None:
        self.working_dir = os.fspath(self.working_dir)
        if self.entity_resolution_llm_check is None:
            self.entity_resolution_llm_check = self.extraction == "llm"
        if self.extraction not in ("llm", "nlp"):
            raise ConfigurationError(f"extraction must be 'llm' or 'nlp', not {self.extraction!r}")
        for name in (
            "chunk_token_size",
            "entity_summary_to_max_tokens",
            "max_graph_cluster_size",
            "community_report_max_token_size",
            "embedding_batch_num",
            "embedding_func_max_async",
            "best_model_max_async",
            "cheap_model_max_async",
        ):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.llm_max_async_total is not None and self.llm_max_async_total <= 0:
            raise ConfigurationError(f"llm_max_async_total must be positive or None, got {self.llm_max_async_total!r}")
        if not 0 <= self.chunk_overlap_token_size < self.chunk_token_size:
            raise ConfigurationError(
                "chunk_overlap_token_size must be >= 0 and smaller than chunk_token_size "
                f"(got {self.chunk_overlap_token_size} and {self.chunk_token_size})"
            )
        if self.nlp_user_dictionary is not None:
            self.nlp_user_dictionary = os.fspath(self.nlp_user_dictionary)
            if not os.path.isfile(self.nlp_user_dictionary):
                raise ConfigurationError(f"nlp_user_dictionary: no such file {self.nlp_user_dictionary!r}")
        if self.small_component_max_entities < 0:
            raise ConfigurationError("small_component_max_entities must be >= 0")
        if self.entity_extract_max_gleaning < 0:
            raise ConfigurationError("entity_extract_max_gleaning must be >= 0")
        if self.extraction_fallback not in (None, "nlp"):
            raise ConfigurationError(f"extraction_fallback must be 'nlp' or None, not {self.extraction_fallback!r}")
        if not 0 <= self.extraction_failure_warning_share <= 1:
            raise ConfigurationError("extraction_failure_warning_share must be between 0 and 1, "
                                     f"got {self.extraction_failure_warning_share!r}")
        if not 0 < self.entity_resolution_threshold <= 2:
            raise ConfigurationError(f"entity_resolution_threshold must be in (0, 2], got {self.entity_resolution_threshold!r}")
        similar = self.entity_resolution_embedding_threshold
        if similar is not None and not 0 < similar <= 1:
            raise ConfigurationError(f"entity_resolution_embedding_threshold must be in (0, 1] or None, got {similar!r}")

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    # Read access by key: nano-graphrag hands storage classes its config as a dict
    # (``global_config["working_dir"]``, ``global_config["addon_params"]``), so storage
    # classes written for it work here unchanged.
    def __getitem__(self, key: str) -> Any:
        if key not in self.field_names():
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.field_names()

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]


def llm_configured(config: GraphRAGConfig) -> bool:
    """Whether a model can be called: a function passed, or an OpenAI-compatible endpoint set."""
    return bool(config.best_model_func or config.llm_api_key or config.llm_base_url
                or os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def keeps_sentence_vectors(config: GraphRAGConfig) -> bool:
    """Whether the index keeps its passages' sentence vectors (``graphrag/rerank.py:
    SentenceVectors``): what the embedding rerank stage reads, embedded at insert."""
    return config.rerank == "embedding"
