"""What a search is asked with (`SearchOptions`) and what answers it (`Searcher`).

Every way into a search takes the same options: the local service (`ctxr.retrieve.service`),
the HTTP client of a served index (`ctxr.retrieve.remote`), `ctxr.Client` over either, and the
faces above them (the CLI, the MCP server, the framework adapters, the Python API). The options
are written here once; a face builds one `SearchOptions` and passes it down.

Callers that predate the options pass them as arguments (`service.search(q, 5, "bm25",
merge=True)`): `SearchOptions.given` reads those in the old order (k, mode, candidates,
fusion; the rest by name), so such code keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

from ctxr.config import FUSIONS, SEARCH_MODES, FusionMethod, RerankChoice
from ctxr.config import SearchMode as FaceMode
from ctxr.errors import ConfigError
from ctxr.types import Hit

# Whole-document BM25 alone, each hit a document's first chunk: for evaluation and diagnosis,
# not one of the faces' modes (it finds nothing in documents too long to carry the vector).
DocumentMode = Literal["bm25-doc"]
DOCUMENT_MODE: DocumentMode = "bm25-doc"
SearchMode = FaceMode | DocumentMode


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """How to search: how many hits, which rankings and how they are fused, which chunks may
    answer, and how the hits are shaped. None means the index's configured default."""

    k: int = 10
    mode: SearchMode = "hybrid"
    candidates: int | None = None  # top-N per retriever before fusion (CTXR_CANDIDATES)
    fusion: FusionMethod | None = None  # hybrid fusion (CTXR_FUSION)
    _: KW_ONLY
    filters: Mapping[str, Any] | None = None  # payload filters (`ctxr.index.filters`)
    merge: bool = False  # join adjacent hits of one document into passages
    # A reranker, "none" to turn it off (CTXR_RERANK); checked by `ctxr.retrieve.rerank`.
    rerank: RerankChoice | None = None
    expand: bool = False  # each hit's parent section (an index built with chunking=parent)

    def __post_init__(self) -> None:
        # Checked where the options are made, so every door refuses the same values the same
        # way, before an index is opened or a request is sent.
        k = self.k
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"k must be at least 1, a whole number; got {k!r}")
        if self.mode not in SEARCH_MODES and self.mode != DOCUMENT_MODE:
            raise ConfigError(
                f"unknown search mode {self.mode!r}; use one of {', '.join(SEARCH_MODES)}"
            )
        if self.fusion is not None and self.fusion not in FUSIONS:
            raise ConfigError(f"unknown fusion {self.fusion!r}; use one of {', '.join(FUSIONS)}")
        cand = self.candidates
        if cand is not None and (not isinstance(cand, int) or isinstance(cand, bool) or cand < 1):
            raise ConfigError(f"candidates must be a whole number of at least 1, got {cand!r}")

    @classmethod
    def given(cls, *args: Any, **kwargs: Any) -> SearchOptions:
        """The options a call gave: one `SearchOptions` (fields named after it override it),
        or the fields themselves, k, mode, candidates and fusion in that order, the rest by
        name."""
        if args and isinstance(args[0], SearchOptions):
            if len(args) > 1:
                raise TypeError("give SearchOptions alone, or its fields, not both positionally")
            return replace(args[0], **kwargs) if kwargs else args[0]
        return cls(*args, **kwargs)

    def with_(self, **changes: Any) -> SearchOptions:
        return replace(self, **changes)


@runtime_checkable
class Searcher(Protocol):
    """A search over one index: the local service or a served index's HTTP client."""

    def search(self, query: str, options: SearchOptions = ..., /) -> list[Hit]:
        """The hits for `query` (implementations also take the options' fields by name, as
        `SearchOptions.given` reads them)."""
        ...

    def search_many(
        self, queries: Sequence[str], options: SearchOptions = ..., /
    ) -> list[list[Hit]]:
        """Each query's hits, in the order asked (embedded or sent as one batch)."""
        ...

    def close(self) -> None: ...


def check_query(query: object) -> str:
    """A query every door accepts: a string with something in it."""
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"query must be a non-empty string, got {query!r:.80}")
    return query
