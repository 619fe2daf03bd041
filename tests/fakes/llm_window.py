"""A local model server's context window, as the fake LLM server plays it.

``FakeLLMServer(context_window=N, server_kind=...)``: a chat completion whose prompt (by the
fake's token count; with ``window_counts_output``, plus its ``max_tokens``, as vLLM and OpenAI
check) passes N tokens is refused with a 400 in the chosen server's words; and the server
answers the endpoint where that kind of server says its window:

- ``"llamacpp"``: ``GET /props`` (``default_generation_settings.n_ctx`` per slot, ``n_predict``)
  and ``GET /v1/models`` (``meta.n_ctx``); the error is llama.cpp's
  ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``;
- ``"vllm"``: ``GET /v1/models`` (``max_model_len``); the error is vLLM's "maximum context
  length" sentence;
- ``"ollama"``: ``POST /api/show`` (``num_ctx`` in ``parameters``); Ollama cuts a long
  prompt without an error, so the fake refuses it in OpenAI's words instead;
- ``"lmstudio"``: ``GET /api/v0/models/{model}`` (``loaded_context_length``);
- None: no such endpoint (a hosted API, a proxy), only the error.

The bodies copy the real servers' answers (llama.cpp's from xllamacpp 2026.10, run on SmolLM2).
"""

from __future__ import annotations

import json
from typing import Any, Literal

ServerKind = Literal["llamacpp", "vllm", "ollama", "lmstudio"]


def info(
    kind: ServerKind | None,
    method: str,
    path: str,
    body: Any,
    window: int | None,
    output_limit: int | None,
    slots: int = 2,
) -> tuple[int, bytes] | None:
    """The answer to a server-info request, or None where `path` is not one for `kind`."""
    if kind is None or window is None:
        return None
    answer: dict[str, Any] | None = None
    if kind == "llamacpp" and (method, path) == ("GET", "/props"):
        answer = {
            "default_generation_settings": {
                "params": {"n_predict": output_limit or -1},
                "n_ctx": window,
            },
            "total_slots": slots,
            "model_path": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
            "build_info": "b0-unknown",
        }
    elif (method, path) == ("GET", "/v1/models") and kind in ("llamacpp", "vllm"):
        entry: dict[str, Any] = {"id": "served-model", "object": "model"}
        if kind == "vllm":
            entry |= {"root": "served-model", "max_model_len": window}
        else:
            entry |= {"owned_by": "llamacpp", "meta": {"n_ctx": window, "n_ctx_train": 8192}}
        answer = {"object": "list", "data": [entry]}
    elif kind == "ollama" and (method, path) == ("POST", "/api/show"):
        # Ollama pads each name to a column of 31 characters.
        parameters = f'{"num_ctx":<31}{window}\n{"stop":<31}"<|im_end|>"'
        if output_limit:
            parameters += f"\n{'num_predict':<31}{output_limit}"
        answer = {
            "parameters": parameters,
            "model_info": {"general.architecture": "llama", "llama.context_length": 32768},
        }
    elif kind == "lmstudio" and method == "GET" and path.startswith("/api/v0/models/"):
        answer = {"id": path.rsplit("/", 1)[1], "max_context_length": 32768,
                  "loaded_context_length": window}  # fmt: skip
    if answer is None:
        return None
    return 200, json.dumps(answer).encode()


def refusal(kind: ServerKind | None, prompt_tokens: int, asked: int, window: int) -> bytes:
    """The 400 body of a request of `prompt_tokens` (`asked` with its answer) past `window`."""
    if kind == "llamacpp":
        error: dict[str, Any] = {
            "code": 400,
            "message": f"request ({prompt_tokens} tokens) exceeds the available context size "
            f"({window} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt_tokens,
            "n_ctx": window,
        }
    elif kind == "vllm":
        error = {
            "message": f"This model's maximum context length is {window} tokens. However, you "
            f"requested {asked} tokens ({prompt_tokens} in the messages, "
            f"{asked - prompt_tokens} in the completion). Please reduce the length of the "
            "messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    else:
        error = {
            "message": f"This model's maximum context length is {window} tokens. However, your "
            f"messages resulted in {asked} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    return json.dumps({"error": error}).encode()
