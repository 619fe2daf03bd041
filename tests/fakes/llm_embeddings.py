"""The embeddings endpoint of the fake LLM server (``POST /v1/embeddings``, OpenAI's shape).

Vectors are deterministic unit vectors (`fake_embedding`); tokens are counted as the rest of
the fake counts them (`fakes.llm_wire.count_text_tokens`: tiktoken, ``cl100k_base`` for the
embedding models). Faults and the rate limit apply as to any generation request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxr.tokens import get_encoding

from .llm_faults import Tokens, latency_for
from .llm_wire import BadRequest, count_text_tokens, encoding_for_model

if TYPE_CHECKING:
    from .llm_server import FakeLLMServer, RecordedRequest


# Embeddings (`POST /v1/embeddings`). Native sizes of OpenAI's models; any other model name is
# a small test model. Limits as the API reference states them: 8,192 tokens per input, 2,048
# inputs and 300,000 tokens per request, no empty strings; `dimensions` only for -3 models.
EMBEDDING_DIMS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
TEST_EMBEDDING_DIM = 64
EMBEDDING_MAX_INPUT_TOKENS = 8192
EMBEDDING_MAX_INPUTS = 2048
EMBEDDING_MAX_REQUEST_TOKENS = 300_000
_WORD = re.compile(r"\w+")


def embedding_dim(model: str, dimensions: Any = None) -> int:
    """The size of the vectors a request gets; raises `BadRequest` as the API would."""
    native = EMBEDDING_DIMS.get(model, TEST_EMBEDDING_DIM)
    if dimensions is None:
        return native
    if model == "text-embedding-ada-002":
        raise BadRequest("This model does not support specifying dimensions.")
    if not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1:
        raise BadRequest("dimensions: must be a positive integer")
    if dimensions > native:
        raise BadRequest(f"dimensions: {model} has at most {native} dimensions")
    return dimensions


def fake_embedding(text: str, model: str, dimensions: int | None = None) -> list[float]:
    """A deterministic unit vector: words hashed (with the model's name) into signed buckets of
    the native size, so texts sharing words are close; `dimensions` keeps the first components
    and re-normalises, which is what OpenAI's shortened embeddings are."""
    native = EMBEDDING_DIMS.get(model, TEST_EMBEDDING_DIM)
    vector = [0.0] * native
    for word in _WORD.findall(text.casefold()):
        value = int.from_bytes(
            hashlib.blake2b(f"{model}\x00{word}".encode()).digest()[:8], "little"
        )
        vector[value % native] += 1.0 if (value >> 32) & 1 else -1.0
    vector = vector[: dimensions or native]
    norm = sum(v * v for v in vector) ** 0.5
    if norm == 0.0:
        return [1.0] + [0.0] * (len(vector) - 1)  # no words: a fixed unit vector
    return [v / norm for v in vector]


def embedding_inputs(body: Mapping[str, Any]) -> list[str]:
    """An embeddings request's texts (token arrays decoded); raises `BadRequest`."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("model: field required")
    raw = body.get("input")
    encoding = get_encoding(encoding_for_model(body["model"]))
    if isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise BadRequest("input: a string or a non-empty array is required")
    if len(raw) > EMBEDDING_MAX_INPUTS:
        raise BadRequest(f"input: at most {EMBEDDING_MAX_INPUTS} inputs per request")
    texts: list[str] = []
    for item in raw:
        if isinstance(item, list) and all(isinstance(t, int) for t in item) and item:
            item = encoding.decode(item)
        if not isinstance(item, str) or not item:
            raise BadRequest("'$.input' is invalid: inputs must be non-empty strings")
        texts.append(item)
    return texts


def openai_embeddings(
    model: str, vectors: Sequence[Sequence[float]], tokens: int, encoding_format: str
) -> dict[str, Any]:
    def encode(vector: Sequence[float]) -> Any:
        if encoding_format != "base64":
            return list(vector)
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()

    data = [
        {"object": "embedding", "index": i, "embedding": encode(v)} for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def embed(fake: FakeLLMServer, body: Any, record: RecordedRequest) -> bytes:
    """The 200 body of an embeddings request; raises `BadRequest`."""
    texts = embedding_inputs(body)
    model = str(body["model"])
    dim = embedding_dim(model, body.get("dimensions"))
    counts = [count_text_tokens(text, model) for text in texts]
    for i, n in enumerate(counts):
        if n > EMBEDDING_MAX_INPUT_TOKENS:
            raise BadRequest(
                f"input[{i}] has {n} tokens; this model's maximum context length is "
                f"{EMBEDDING_MAX_INPUT_TOKENS} tokens"
            )
    if sum(counts) > EMBEDDING_MAX_REQUEST_TOKENS:
        raise BadRequest(
            f"Requested {sum(counts)} tokens, max {EMBEDDING_MAX_REQUEST_TOKENS} tokens per request"
        )
    scale = fake.embedding_scale  # != 1: a compatible server that does not normalise
    vectors = [[scale * v for v in fake_embedding(t, model, dim)] for t in texts]
    fake._sleep(latency_for(fake.latency, Tokens(sum(counts), 0, 0, 0)))
    usage = {"prompt_tokens": sum(counts), "total_tokens": sum(counts)}
    with fake._lock:
        record.usage = usage
    fmt = str(body.get("encoding_format") or "float")
    return json.dumps(openai_embeddings(model, vectors, sum(counts), fmt)).encode()
