"""The rerank endpoint of the fake LLM server (``POST /v1/rerank``, Cohere's shape, which Jina,
Voyage and text-embeddings-inference also speak).

Request ``{"model", "query", "documents": [str | {"text"}], "top_n"}``; answer ``{"id",
"results": [{"index", "relevance_score"}], "meta"}``, best first. Relevance is deterministic:
the share of the query's distinct words found in the document (ties: lower index first), so a
test can predict the order. Faults and the rate limit apply as to any other request.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from .llm_faults import Tokens, latency_for
from .llm_wire import BadRequest

if TYPE_CHECKING:
    from .llm_server import FakeLLMServer, RecordedRequest

MAX_DOCUMENTS = 1000
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def relevance(query: str, document: str) -> float:
    """Share of the query's distinct words that the document contains (0 to 1)."""
    wanted = words(query)
    return len(wanted & words(document)) / len(wanted) if wanted else 0.0


def rerank_documents(body: Any) -> tuple[str, list[str], int]:
    """The query, the documents' texts and top_n of a request; raises `BadRequest`."""
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequest("query: a non-empty string is required")
    raw = body.get("documents")
    if not isinstance(raw, list) or not raw:
        raise BadRequest("documents: a non-empty array is required")
    if len(raw) > MAX_DOCUMENTS:
        raise BadRequest(f"documents: at most {MAX_DOCUMENTS} per request")
    texts: list[str] = []
    for i, item in enumerate(raw):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise BadRequest(f"documents[{i}]: a string or an object with text is required")
        texts.append(text)
    top_n = body.get("top_n", len(texts))
    if not isinstance(top_n, int) or isinstance(top_n, bool) or top_n < 1:
        raise BadRequest("top_n: must be a positive integer")
    return query, texts, min(top_n, len(texts))


def rerank(fake: FakeLLMServer, body: Any, record: RecordedRequest) -> bytes:
    """The 200 body of a rerank request; raises `BadRequest`."""
    query, texts, top_n = rerank_documents(body)
    scored = sorted(
        ((relevance(query, t), i) for i, t in enumerate(texts)), key=lambda p: (-p[0], p[1])
    )
    results = [{"index": i, "relevance_score": round(s, 6)} for s, i in scored[:top_n]]
    fake._sleep(latency_for(fake.latency, Tokens(0, 0, 0, 0)))
    units = {"search_units": 1}
    with fake._lock:
        record.usage = units
    meta = {"api_version": {"version": "2"}, "billed_units": units}
    return json.dumps({"id": str(uuid.uuid4()), "results": results, "meta": meta}).encode()
