"""Settings from flags, the environment and a `.env` file, in that order of precedence.

Every setting has the ``CTXR_`` prefix in the environment (``CTXR_INDEX_DIR``...); `.env.example`
lists them all. Flags reach here as keyword overrides from the CLI.

`Settings` holds where the index lives and one typed group per layer: `corpus` (what is read),
`split` (chunking), `llm` (contexts), `embed` (dense vectors), `store` (the Qdrant collection
and its BM25 analysis), `search` (fusion and reranking), `api` (the servers) and `run` (where a
run splits and embeds). A layer is handed its own group, so what it may read is what its
signature says. The groups keep the flat ``CTXR_*`` names (no ``CTXR_LLM__...`` nesting), and
a setting is named flat from Python too: ``Settings(chunk_tokens=300)`` and
``settings.replace(fusion="rrf")`` find its group.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self, TypeVar, get_args

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ctxr.errors import ConfigError
from ctxr.types import DocumentKind, NonDocument

ContextMode = Literal["auto", "llm", "outline", "none"]
SearchMode = Literal["hybrid", "dense", "bm25"]
FusionMethod = Literal["dbsf", "rrf", "weighted"]
Chunking = Literal["structure", "semantic", "parent"]
RerankerName = Literal["llm", "http", "cross-encoder"]
RerankChoice = Literal[RerankerName, "none"]  # what a request may name; "none" turns it off
Retriever = Literal["dense", "bm25", "bm25_doc"]
# Where hybrid search puts the whole-document BM25 ranking (`ctxr.retrieve.documents`).
DocRanking = Literal["best", "carrier", "off"]
# How the dense vectors are held in memory (`ctxr.index.store.quantization`).
Quantization = Literal["none", "int8"]

# The one list of each choice: the CLI's click.Choice, the API's models and the search service
# all read these, so a new mode or fusion is added in one place.
CONTEXT_MODES: Final[tuple[str, ...]] = get_args(ContextMode)
SEARCH_MODES: Final[tuple[str, ...]] = get_args(SearchMode)
FUSIONS: Final[tuple[str, ...]] = get_args(FusionMethod)
CHUNKINGS: Final[tuple[str, ...]] = get_args(Chunking)
RERANKERS: Final[tuple[str, ...]] = get_args(RerankerName)
RERANK_OFF: Final = "none"
DEFAULT_FUSION_WEIGHTS: Final[Mapping[str, float]] = {"dense": 0.8, "bm25": 0.2}


class _Group(BaseSettings):
    """A group of settings read from the environment and `.env` under the flat ``CTXR_`` names."""

    model_config = SettingsConfigDict(
        env_prefix="CTXR_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    @classmethod
    def from_env(cls) -> Self:
        """The group as the environment and `.env` set it."""
        return cls(**{})


class CorpusSettings(_Group):
    """What a run reads: file size limits, links, non-documents, free disk space."""

    max_file_bytes: int = Field(20_000_000, ge=1, description="larger files are skipped")
    # A run checks the disk before it asks the LLM or writes the index (pipeline/space.py):
    # a full filesystem kills the engine's memory-mapped writes with SIGBUS.
    min_free_mb: int = Field(
        64, ge=0, description="MB left free beyond a run's estimated writes; 0 skips the check"
    )
    # Links that resolve outside the indexed folders are skipped unless this is on (walk.Links).
    follow_links: bool = Field(
        False, description="follow links that lead outside the indexed folders"
    )
    # A file whose size, times and inode match the manifest's record is not read again
    # (ctxr.file_stamp); off, every file is read and hashed to find what changed.
    trust_file_stamps: bool = Field(
        True, description="pass over files whose size, times and inode are as indexed"
    )
    # Text that is not a document (ctxr.enrich.load.kinds) is skipped unless named here.
    include: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(), description="non-documents to index anyway: markup,minified,lock,data"
    )

    @field_validator("include", mode="before")
    @classmethod
    def _include_parse(cls, value: Any) -> Any:
        return parse_include(value) if isinstance(value, str | list | tuple | set) else value


class SplitSettings(_Group):
    """How documents are split: chunk budgets, strategies and the tokenizer that sizes them."""

    # Splitting: the local MiniLM reads 256 word pieces at most, so chunks default to a budget
    # that leaves room for the context prefix (see docs/explanation/dependencies.md).
    chunk_tokens: int = Field(200, ge=16, le=8192, description="chunk budget in tiktoken tokens")
    chunk_overlap: int | None = Field(None, ge=0, description="overlap tokens; default per kind")
    # Per-kind budgets override chunk_tokens for those kinds: "code=300,markdown=400" in the
    # environment or a flag, a mapping from Python; parsed once, here.
    chunk_tokens_by_kind: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="per-kind chunk budgets: KIND=TOKENS,... (markdown, code, text, ...)",
    )
    # The embedder's input is a hard cap: a chunk whose prefix + text + this allowance for its
    # context exceeds the embedder's max_tokens (word pieces) is split further.
    context_reserve_tokens: int = Field(
        48, ge=0, le=4096, description="embedder tokens kept free for each chunk's context"
    )
    cap_to_embedder: bool = Field(
        True, description="split chunks the embedder would truncate (off: budget alone)"
    )
    # A prose document's budget is scaled by its language's token inflation against English
    # (ctxr.enrich.split.inflation), so a Japanese chunk holds what an English one does.
    language_budgets: bool = Field(
        True, description="scale prose chunk budgets by the document language's token inflation"
    )
    # Chunking options (ctxr.enrich.split.semantic / .parent); part of each document's recipe.
    chunking: Chunking = Field(
        "structure", description="structure, semantic (topic breakpoints) or parent (parent-child)"
    )
    parent_tokens: int = Field(1024, ge=16, le=32768, description="parent section budget")
    semantic_percentile: float = Field(
        95.0, ge=0, le=100, description="semantic breakpoint distance percentile"
    )
    encoding: str = Field("cl100k_base", description="tiktoken encoding used to size chunks")

    @field_validator("chunk_tokens_by_kind", mode="before")
    @classmethod
    def _kind_budgets_parse(cls, value: Any) -> Any:
        return parse_kind_budgets(_as_spec(value))

    def chunk_tokens_for(self, kind: str) -> int:
        """The chunk budget for documents of `kind`: its own, else `chunk_tokens`."""
        return self.chunk_tokens_by_kind.get(kind, self.chunk_tokens)


class LLMSettings(_Group):
    """How each chunk is situated: the context mode, the LLM provider, its limits and the plan."""

    context: ContextMode = Field("auto", description="how each chunk is situated")
    # LLM contexts (`context` llm, or auto with a provider key or base URL in the environment).
    llm_provider: Literal["anthropic", "openai"] | None = Field(
        None, description="context writer; default: detected from ANTHROPIC_*/OPENAI_* variables"
    )
    llm_model: str | None = Field(None, description="default claude-haiku-4-5 / gpt-4o-mini")
    llm_concurrency: int = Field(8, ge=1, le=256, description="LLM requests in flight")
    llm_requests_per_minute: float | None = Field(None, gt=0)
    llm_input_tokens_per_minute: float | None = Field(None, gt=0)
    llm_output_tokens_per_minute: float | None = Field(None, gt=0)
    # Unset, a local base URL gets ctxr.llm.local.LOCAL_TIMEOUT_SECONDS (600, measured on a CPU).
    llm_timeout: float = Field(
        60.0,
        gt=0,
        description="seconds per LLM request, answer included (a deadline); unset: 600 for a "
        "local base URL",
    )
    # Where the server does not say it (ctxr.llm.server_limits): requests are sized to fit.
    llm_context_tokens: int | None = Field(
        None,
        ge=512,
        description="context window of one LLM request (prompt + answer); default: what the "
        "server reports (llama.cpp, vLLM, Ollama, LM Studio)",
    )
    # 60 s: per-minute limits refill within a minute, so a provider asking for longer means a
    # quota or an outage that waiting inside a run does not repair (ctxr.enrich.situate.sender).
    llm_max_retry_wait: float = Field(
        60.0,
        gt=0,
        description="longest retry-after waited for; a provider asking for more ends the "
        "run's requests (outline contexts, asked again next run)",
    )
    llm_max_output_tokens: int = Field(200, ge=16, le=4096, description="per context")
    # Grouped situating (ctxr.enrich.situate.plan): several chunks of one document per request.
    # 64 by cost (bench/cost/context_cost.py, docs/explanation/benchmarks.md): most documents
    # are then one request, below the cache minimum as above it; 1 is Anthropic's published
    # method.
    llm_group_size: int = Field(
        64, ge=1, le=64, description="chunks situated per LLM request; 1 = one request per chunk"
    )
    # Packs (ctxr.enrich.situate.plan): small uncached documents share one grouped request.
    # 8,000 is chosen by cost, not tuned on queries: the per-request overhead is ~400 tokens, so
    # past 8k a pack saves under 5% more, and a request stays the size of one document of
    # Anthropic's guide, whose chunks a model situates well.
    llm_pack_tokens: int = Field(
        8000,
        ge=0,
        le=100_000,
        description="small documents situated together up to these "
        "tokens per request; 0 = one document a request",
    )
    # Batch APIs (ctxr.enrich.situate.batch): half price, results within 24 hours, resumable.
    llm_batch: bool = Field(False, description="send contexts through the provider's batch API")
    llm_batch_poll_seconds: float = Field(
        30.0, gt=0, le=3600, description="seconds between status checks of a batch"
    )
    max_document_tokens: int = Field(
        100_000, ge=1000, description="longer documents are sent to the LLM in windows"
    )
    claude_tokenizer: Literal["auto", "ctok", "cl100k"] = Field(
        "auto", description="how estimates count Claude tokens; auto: ctok when installed"
    )
    prices_file: Path | None = Field(None, description="JSON that adds or overrides model prices")


class EmbedSettings(_Group):
    """Who makes dense vectors, from what text, at what rate."""

    # Dense vectors: the local ONNX MiniLM, or OpenAI / any OpenAI-compatible /v1/embeddings
    # (reached through OPENAI_API_KEY / OPENAI_BASE_URL, as the LLM calls are).
    embedder: Literal["local", "openai"] = Field("local", description="who makes dense vectors")
    embedding_model: str | None = Field(None, description="openai model; text-embedding-3-small")
    # The embeddings server when it is not the LLM's (TEI or vLLM beside an Ollama LLM): both
    # default to OPENAI_BASE_URL / OPENAI_API_KEY.
    embedding_base_url: str | None = Field(
        None, description="OpenAI-compatible /v1/embeddings server; default OPENAI_BASE_URL"
    )
    embedding_api_key: SecretStr | None = Field(
        None, description="key for CTXR_EMBEDDING_BASE_URL; default OPENAI_API_KEY"
    )
    embedding_dimensions: int | None = Field(
        None, ge=1, description="shortened vectors (-3 models)"
    )
    # 8, not 32: onnxruntime's arena keeps the largest batch's activations (attention grows
    # with batch x 256 x 256 x 12 heads), so 32 held 1.47 GB where 8 holds 0.53 GB, no slower on
    # length-sorted batches (docs/explanation/benchmarks.md, "Embedding memory").
    embed_batch_size: int = Field(8, ge=1, le=1024)
    embed_threads: int | None = Field(None, ge=1, description="onnxruntime threads")
    embedding_requests_per_minute: float | None = Field(None, gt=0)
    embedding_tokens_per_minute: float | None = Field(None, gt=0)
    # Code is embedded with its identifiers as words (parseHTTPResponse -> parse HTTP
    # Response), and so are the queries of an index holding such code (identifiers module).
    split_identifiers: bool = Field(
        True, description="embed code's camelCase/snake_case identifiers as words"
    )
    context_position: Literal["before", "after"] = Field(
        "before", description="where the context goes in the embedded text: before the chunk"
    )
    # Asymmetric embedders read a role before the text: e5 "query: " and "passage: ", nomic
    # "search_query: " and "search_document: ", bge an instruction before queries only. The
    # index records both (vectors made with one pair do not answer queries made with another).
    embedding_query_prefix: str = Field(
        "", description='text put before every query the embedder reads, e.g. "query: "'
    )
    embedding_document_prefix: str = Field(
        "", description='text put before every chunk the embedder reads, e.g. "passage: "'
    )

    @field_validator(
        "embedding_model",
        "embedding_base_url",
        "embedding_api_key",
        "embedding_dimensions",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # `CTXR_QDRANT_URL=` in a .env means "not set", not "a server at ''".
        return _blank_is_unset(value)


class StoreSettings(_Group):
    """Where the points live (the embedded shard or a Qdrant server); HNSW and BM25 parameters."""

    # A Qdrant server or cluster instead of the embedded shard; same schema, local manifest.
    qdrant_url: str | None = Field(None, description="e.g. http://localhost:6333; unset = embedded")
    qdrant_api_key: SecretStr | None = Field(None, description="the server's API key, if any")
    qdrant_collection: str = Field("ctxr", min_length=1, description="collection on the server")
    qdrant_shards: int = Field(1, ge=1, description="shard_number when ctxr creates the collection")
    qdrant_replicas: int = Field(1, ge=1, description="replication_factor on creation")
    # Writes to a server (ctxr.index.store.server_writes): batches in parallel, and a busy or
    # restarting node's 429/502/503/504 or refused connection retried with backoff.
    qdrant_write_parallel: int = Field(
        4, ge=1, le=64, description="upsert batches sent to a Qdrant server at once"
    )
    qdrant_write_attempts: int = Field(
        6, ge=1, le=20, description="tries of a batch a busy or restarting server refuses"
    )
    # 256, not 128: recall@10 vs exact on SciFact's real MiniLM vectors is 0.997 at 128 but
    # 0.989 at 128 / 0.992 at 256 at 100k points (bench/quality/hnsw_recall.py,
    # docs/explanation/benchmarks.md), for about 0.2 ms more per dense query.
    hnsw_ef: int = Field(256, ge=1, description="HNSW search breadth once the index is built")
    optimize_min_points: int = Field(
        10_000, ge=0, description="build HNSW after a run once the index holds this many points"
    )
    # The embedded shard's segments hold at most this many points: a run that writes more
    # closes the segment it writes to (builds its HNSW index) and goes on in a new one. The
    # engine searches a shard's segments in parallel, one thread each, so a search over a
    # large index uses more than one core, and each HNSW build is bounded. The limit that keeps
    # closed segments apart is set when a shard is created (`segment_optimizers`); a Qdrant
    # server makes its own segments. See docs/explanation/benchmarks.md.
    segment_points: int = Field(
        500_000, ge=0, description="points a segment of a new embedded shard holds; 0: one segment"
    )
    # int8: the dense vectors searched as bytes held in memory, the float32 originals read from
    # disk only to rescore twice the candidates asked for (`ctxr.index.store.quantization`).
    # Recall against exact search on real MiniLM vectors equals float32 HNSW's, the HNSW build
    # takes half the time and the vectors held in memory a quarter of the bytes
    # (docs/explanation/benchmarks.md). The judged sets score as with float32 to the fourth
    # decimal, and a million chunks are served in 2.1 GB instead of 3.6, so int8 is the
    # default. Fixed when an index is created: --rebuild to change.
    quantization: Quantization = Field(
        "int8", description="int8: dense vectors as bytes in memory; none: float32 (new indexes)"
    )
    # With int8, the candidates found on the bytes are ranked again by their float32 originals,
    # read from disk (`ctxr.index.store.quantization`); false ranks by the bytes alone and
    # never reads the originals: less memory and half the dense query time, for recall@10
    # 0.982 against exact search and slightly lower dense quality. A search setting.
    rescore: bool = Field(
        True, description="int8: rank the candidates again by their float32 originals"
    )
    bm25_k1: float = Field(1.2, gt=0)
    bm25_b: float = Field(0.75, ge=0, le=1)
    # A short document's whole text also gets one BM25 vector, on its first chunk
    # (`ctxr.index.bm25.documents`); hybrid search fuses that document ranking as a third.
    doc_bm25_tokens: int = Field(
        1024, ge=0, description="documents up to this many tokens get a whole-document BM25; 0 off"
    )

    @field_validator("qdrant_url", "qdrant_api_key", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # `CTXR_QDRANT_URL=` in a .env means "not set", not "a server at ''".
        return _blank_is_unset(value)


class SearchSettings(_Group):
    """How hybrid search fuses its rankings and reranks them."""

    # DBSF by default: on anthropic-codebase and SciFact it beat RRF k=60
    # (docs/explanation/evaluation.md).
    fusion: FusionMethod = Field("dbsf", description="how hybrid search fuses the two rankings")
    rrf_k: int = Field(60, ge=0, description="reciprocal rank fusion constant")
    # Weighted rank fusion as in Anthropic's contextual-retrieval reference: sum w / (k + rank)
    # over each retriever's top `candidates`, with their 0.8 dense / 0.2 BM25 and k = 0.
    fusion_weights: Annotated[dict[str, float], NoDecode] = Field(
        default_factory=lambda: dict(DEFAULT_FUSION_WEIGHTS),
        description="weighted fusion: RETRIEVER=WEIGHT,... (dense, bm25, bm25_doc)",
    )
    weighted_k: int = Field(0, ge=0, description="weighted rank fusion constant")
    # Also DBSF's normalisation window: a search for more hits fetches deeper but normalises
    # each ranking over its first `candidates` scores (`ctxr.retrieve.fusion`).
    candidates: int = Field(
        50, ge=1, le=10_000, description="top-N per retriever fused (DBSF normalises over them)"
    )
    # Vectors of repeated queries are kept in memory by the search service
    # (`ctxr.retrieve.query_cache`): 4096 of MiniLM's are 6 MiB.
    query_cache_size: int = Field(
        4096, ge=0, le=1_000_000, description="query vectors kept for repeated searches; 0 = off"
    )
    doc_ranking: DocRanking = Field(
        "best",
        description="hybrid: document BM25 lands on the document's best chunk, its first, or off",
    )
    doc_bm25_weight: float = Field(
        0.5, gt=0, description="DBSF/RRF weight of the document BM25 ranking (the others 1)"
    )
    # DBSF leans on BM25 less for a query the dense retriever is sure of
    # (`ctxr.retrieve.confidence`): the threshold is a cosine of one embedder, so "auto" takes
    # the one measured for the index's embedder and is off for an embedder not measured.
    dense_confidence: float | Literal["auto", "off"] = Field(
        "auto",
        description="dense top score from which DBSF gives BM25 less weight: auto (the "
        "embedder's measured score: 0.7 for the embedded MiniLM, off for others), off, or -1..1",
    )
    dense_confident_bm25: float = Field(
        0.6, gt=0, le=1, description="share of BM25's DBSF weight when the dense retriever is sure"
    )
    # Reranking (`ctxr.retrieve.rerank.base`): off unless a request or CTXR_RERANK names a reranker.
    rerank: RerankChoice | None = Field(
        None, description="reranker used when a request names none; none/unset = off"
    )
    rerank_candidates: int = Field(
        50, ge=1, le=1000, description="top-N fused candidates the reranker reads"
    )
    rerank_timeout: float = Field(
        10.0, gt=0, description="seconds before a reranker gives up (fused order, flagged)"
    )
    rerank_url: str | None = Field(
        None, description="Cohere-compatible rerank endpoint, e.g. https://api.cohere.com/v2/rerank"
    )
    rerank_api_key: SecretStr | None = Field(None, description="bearer key for CTXR_RERANK_URL")
    rerank_model: str | None = Field(None, description="model sent to CTXR_RERANK_URL")
    rerank_model_path: Path | None = Field(
        None, description="directory with a cross-encoder's model.onnx and tokenizer.json"
    )

    @field_validator("fusion_weights", mode="before")
    @classmethod
    def _weights_parse(cls, value: Any) -> Any:
        return parse_weights(_as_spec(value))

    @field_validator("dense_confidence", mode="before")
    @classmethod
    def _auto_off_or_a_cosine(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("auto", "off"):
            return value.strip().lower()
        wrong = f"auto, off or a cosine between -1 and 1, got {value!r}"
        if isinstance(value, bool):
            raise ValueError(wrong)
        try:
            cosine = float(value)
        except (TypeError, ValueError):
            raise ValueError(wrong) from None
        if not -1.0 <= cosine <= 1.0:  # NaN too
            raise ValueError(f"a cosine is between -1 and 1, got {cosine:g}; or auto, or off")
        return cosine

    @field_validator(
        "rerank", "rerank_url", "rerank_api_key", "rerank_model", "rerank_model_path", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # `CTXR_QDRANT_URL=` in a .env means "not set", not "a server at ''".
        return _blank_is_unset(value)


class RunSettings(_Group):
    """How a run is carried out: where it splits and embeds (this process, or Ray actors:
    `ctxr.pipeline.executors`), and how much of the corpus it holds at once."""

    # A run loads, splits, situates and writes a window of documents at a time, so its memory
    # does not grow with the corpus (`ctxr.pipeline.windows`).
    window_documents: int = Field(
        1_000,
        ge=1,
        description="documents a run loads, splits and situates at once (memory is one window)",
    )

    # Ray joins the cluster RAY_ADDRESS names (Ray's own variable), else starts one for the run.
    executor: Literal["local", "ray"] = Field(
        "local", description="where `ctxr index` splits and embeds: local, or ray (--ray)"
    )
    ray_workers: int | None = Field(
        None, ge=1, description="Ray actors per stage; default: the cluster's CPUs / worker CPUs"
    )
    ray_worker_cpus: float = Field(1.0, gt=0, description="CPUs each Ray actor asks for")
    ray_worker_gpus: float = Field(
        0.0,
        ge=0,
        description="GPUs each embedding actor asks for (placement: the local ONNX "
        "MiniLM runs on CPU)",
    )
    ray_local_cpus: int | None = Field(
        None, ge=1, description="CPUs of a local Ray started for the run; default: all"
    )


class ApiSettings(_Group):
    """The HTTP API and the MCP server: tokens, request limits, hosts, sessions."""

    # The HTTP API (`ctxr serve`): bearer token, request limits (422/413 beyond), access log.
    api_token: SecretStr | None = Field(None, description="bearer token every request must send")
    api_max_query_chars: int = Field(2000, ge=1, description="longest query text accepted")
    api_max_k: int = Field(100, ge=1, description="most hits one query may ask for")
    api_max_batch: int = Field(32, ge=1, description="most queries in one request")
    api_max_candidates: int = Field(1000, ge=1, description="largest per-request candidates")
    api_max_body_bytes: int = Field(65_536, ge=256, description="larger request bodies get 413")
    api_header_timeout: float = Field(
        10.0, gt=0, description="seconds a client has to send a request's headers"
    )
    api_access_log: bool = Field(True, description="one JSON line per request on stderr")
    api_log_queries: bool = Field(False, description="put query text in the access log")
    # What a request may cost the server: the whole body within a deadline (408 after), open
    # connections (503 beyond), paid rerank calls (422 beyond).
    api_body_timeout: float = Field(
        30.0, gt=0, description="seconds a client has to send a request's whole body"
    )
    api_max_connections: int = Field(
        512, ge=1, description="open connections beyond which new requests get 503"
    )
    api_max_rerank_queries: int = Field(
        4, ge=1, description="most queries one request may rerank with llm or http (paid)"
    )
    # Host names both servers answer besides localhost and IP addresses (DNS rebinding).
    api_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Host header names the servers accept: NAME,...; * accepts any"
    )
    # Changing what a served index holds (POST /index/update) is not searching: it needs the
    # owner file's token or this one, never CTXR_API_TOKEN, and reads only indexed folders.
    api_update_token: SecretStr | None = Field(
        None, description="bearer token for POST /index/update, besides the owner file's"
    )
    api_update_roots: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="folders updates may read besides those the index was built from: PATH,..."
    )
    mcp_max_sessions: int = Field(100, ge=1, description="open MCP HTTP sessions; more get 503")
    mcp_session_idle_timeout: float = Field(
        600.0, gt=0, description="seconds an idle MCP HTTP session is kept"
    )

    # `ctxr trial` reports the page shows (GET /trials): their files or output folders.
    api_trials: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="trial.json files (or ctxr trial --out folders) the page shows: PATH,..."
    )

    @field_validator("api_allowed_hosts", "api_update_roots", "api_trials", mode="before")
    @classmethod
    def _list_parse(cls, value: Any) -> Any:
        if isinstance(value, str):  # NAME,NAME from the environment or a flag
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value


GROUPS: Final[dict[str, type[_Group]]] = {
    "corpus": CorpusSettings,
    "split": SplitSettings,
    "llm": LLMSettings,
    "embed": EmbedSettings,
    "store": StoreSettings,
    "search": SearchSettings,
    "api": ApiSettings,
    "run": RunSettings,
}
# Each flat setting name -> the group that holds it (names are unique across groups).
GROUP_OF: Final[dict[str, str]] = {
    name: group for group, model in GROUPS.items() for name in model.model_fields
}


class Settings(BaseSettings):
    """Where the index lives, and one typed group of settings per layer."""

    model_config = SettingsConfigDict(
        env_prefix="CTXR_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    index_dir: Path = Field(Path(".ctxr"), description="where the index lives")
    cache_dir: Path | None = Field(None, description="embedding cache; default INDEX_DIR/cache")
    # Where `ctxr eval` finds its data sets (anthropic-codebase/, scifact/); unset: the nearest
    # shared/data above the working directory or the package (`ctxr.eval.datasets`).
    data_dir: Path | None = Field(None, description="evaluation data; default ../shared/data")
    corpus: CorpusSettings = Field(default_factory=CorpusSettings.from_env)
    split: SplitSettings = Field(default_factory=SplitSettings.from_env)
    llm: LLMSettings = Field(default_factory=LLMSettings.from_env)
    embed: EmbedSettings = Field(default_factory=EmbedSettings.from_env)
    store: StoreSettings = Field(default_factory=StoreSettings.from_env)
    search: SearchSettings = Field(default_factory=SearchSettings.from_env)
    api: ApiSettings = Field(default_factory=ApiSettings.from_env)
    run: RunSettings = Field(default_factory=RunSettings.from_env)

    def __init__(self, **values: Any) -> None:
        # Flat names (chunk_tokens=300) are built into their group here, before validation, so
        # each group still reads the rest of its settings from the environment and `.env`.
        super().__init__(**_grouped(values))

    def replace(self, **changes: Any) -> Settings:
        """A copy with some settings changed, named flat (``replace(fusion="rrf")``); each
        change is validated as the environment's value would be."""
        top = {name: value for name, value in changes.items() if name not in GROUP_OF}
        unknown = sorted(set(top) - set(type(self).model_fields))
        if unknown:
            raise ValueError(f"unknown setting {', '.join(unknown)}")
        update: dict[str, Any] = {}
        for group in GROUPS:
            mine = {name: v for name, v in changes.items() if GROUP_OF.get(name) == group}
            if mine:
                update[group] = _changed(getattr(self, group), mine)
        base = _changed(self, top) if top else self
        return base.model_copy(update=update)


def setting_fields() -> dict[str, FieldInfo]:
    """Every setting by its flat name (``chunk_tokens``), whichever group holds it: the names
    `.env.example`, the flags and the reference pages use."""
    fields = {name: field for name, field in Settings.model_fields.items() if name not in GROUPS}
    for model in GROUPS.values():
        fields.update(model.model_fields)
    return fields


def _grouped(values: Mapping[str, Any]) -> dict[str, Any]:
    """Flat setting names gathered into their groups, each group built from them (and the
    environment); group objects or mappings given whole pass through."""
    flat: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
    rest: dict[str, Any] = {}
    for name, value in values.items():
        if name in GROUP_OF:
            flat[GROUP_OF[name]][name] = value
        else:
            rest[name] = value
    for group, model in GROUPS.items():
        given = rest.get(group)
        if isinstance(given, model):
            rest[group] = _changed(given, flat[group]) if flat[group] else given
        elif isinstance(given, Mapping) or flat[group]:
            rest[group] = model(**{**(given or {}), **flat[group]})
    return rest


_G = TypeVar("_G", bound=BaseModel)


def _changed(group: _G, changes: Mapping[str, Any]) -> _G:
    """`group` with `changes` validated and applied; they count as set, as a flag's would."""
    checked = type(group).model_validate({**group.model_dump(), **changes})
    return group.model_copy(update={name: getattr(checked, name) for name in changes})


def _blank_is_unset(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _as_spec(value: Any) -> str:
    """A mapping given from Python as the `KEY=VALUE,...` text the parsers check."""
    if isinstance(value, Mapping):
        return ",".join(f"{key}={number}" for key, number in value.items())
    return str(value)


def parse_weights(text: str) -> dict[str, float]:
    """`dense=0.8,bm25=0.2` into {"dense": 0.8, "bm25": 0.2}; ValueError naming the problem."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or name not in get_args(Retriever):
            raise ValueError(f"expected dense=W,bm25=W, got {text!r}")
        try:
            weights[name] = float(raw)
        except ValueError:
            raise ValueError(f"weight of {name} is not a number: {raw.strip()!r}") from None
        if weights[name] < 0:
            raise ValueError(f"weight of {name} must be >= 0, got {weights[name]}")
    if not any(weights.values()):
        raise ValueError(f"at least one weight must be above 0, got {text!r}")
    return weights


def parse_include(names: str | list[str] | tuple[str, ...] | set[str]) -> frozenset[str]:
    """`"markup,lock"` (or a list of names) into the set of non-documents to index anyway."""
    parts = names.split(",") if isinstance(names, str) else list(names)
    chosen = {part.strip().lower() for part in parts if part.strip()}
    kinds = get_args(NonDocument)
    unknown = sorted(chosen - set(kinds))
    if unknown:
        raise ValueError(f"unknown kind {', '.join(unknown)}; expected any of {', '.join(kinds)}")
    return frozenset(chosen)


def parse_kind_budgets(text: str) -> dict[str, int]:
    """`code=300,markdown=400` into {"code": 300, "markdown": 400}; blank is {}."""
    kinds = get_args(DocumentKind)
    budgets: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        kind, sep, raw = part.partition("=")
        kind = kind.strip()
        if not sep or kind not in kinds:
            raise ValueError(
                f"expected KIND=TOKENS with KIND one of {', '.join(kinds)}, got {part!r}"
            )
        try:
            budgets[kind] = int(raw)
        except ValueError:
            raise ValueError(f"budget of {kind} is not a whole number: {raw.strip()!r}") from None
        if not 16 <= budgets[kind] <= 8192:
            raise ValueError(f"budget of {kind} must be 16 to 8192, got {budgets[kind]}")
    return budgets


def load_settings(*, flags: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings with CLI overrides applied; a `None` override means "flag not given".

    A bad value is named where it came from: the flag (`flags` maps a setting to the CLI flag
    that gave it, e.g. ``{"chunk_tokens": "--max-tokens"}``), the keyword a Python caller
    passed, or the ``CTXR_*`` variable (environment or `.env`)."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems, fixes = [], []
        for err in exc.errors():
            # A group's error is located in the group alone; the flat name is its last part.
            field = str(err["loc"][-1]) if err["loc"] else ""
            variable = f"CTXR_{field}".upper()
            if field in given and flags and field in flags:
                where, fix = f"{flags[field]} {given[field]}", "the flag"
            elif field in given:  # a Python caller's keyword, which the variable also sets
                where, fix = f"{field}={given[field]!r} ({variable})", "the argument"
            else:
                where, fix = variable, "the CTXR_* variable or .env"
            problems.append(f"{where}: {err['msg']}")
            fixes.append(fix)
        raise ConfigError(
            f"invalid setting ({'; '.join(problems)}); fix {' and '.join(dict.fromkeys(fixes))}"
        ) from exc
