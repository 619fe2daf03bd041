"""What an OpenAI-compatible server says about its context window and output limit.

A local server's window is whatever it was started with (llama.cpp `-c` divided among its
slots, vLLM `--max-model-len`, Ollama `num_ctx`), often far below the model's own; a request
past it is refused (llama.cpp, vLLM) or silently cut (Ollama). ctxr asks the server once per
run, where it says:

- llama.cpp: `GET /props`: `default_generation_settings.n_ctx` is one slot's window (the `-c`
  total divided by `--parallel`), `params.n_predict` its output limit (-1: none);
- vLLM: `GET /v1/models`: `max_model_len` of the model served;
- llama.cpp again: `GET /v1/models`: `meta.n_ctx` (older builds without `/props`);
- LM Studio: `GET /api/v0/models/{model}`: `loaded_context_length`;
- Ollama: `POST /api/show`: `num_ctx` in its `parameters` (a Modelfile's), else the loaded
  model's `context_length` from `GET /api/ps`.

Nothing is sent to the model. A server that answers none of these (a hosted API, a proxy) has
no known window: `CTXR_LLM_CONTEXT_TOKENS` gives it, and a context-length error still splits
the request (`ctxr.enrich.situate.queue`). The parsers are pure functions of the JSON, so the
tests pin them against the real servers' answers.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

PROBE_TIMEOUT_SECONDS = 5.0
_MAX_PROBE_BYTES = 4 * 2**20  # a model list or /props is kilobytes; never read more


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """A server's window for one request (prompt and answer together), its output limit if it
    has one, and where each came from (for the run's note)."""

    context_tokens: int | None
    output_tokens: int | None = None
    source: str = ""
    slots: int | None = None  # requests the server runs at once (llama.cpp's --parallel)


def _positive(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def llamacpp_props(body: Any) -> ServerLimits | None:
    """llama.cpp's `/props`: the per-slot `n_ctx` and `n_predict`."""
    if not isinstance(body, Mapping):
        return None
    settings = body.get("default_generation_settings")
    if not isinstance(settings, Mapping):
        return None
    window = _positive(settings.get("n_ctx"))
    params = settings.get("params")
    output = _positive(params.get("n_predict")) if isinstance(params, Mapping) else None
    if window is None:
        return None
    slots = _positive(body.get("total_slots"))
    where = f"llama.cpp /props (n_ctx per slot{f', {slots} slots' if slots else ''})"
    return ServerLimits(window, output, where, slots)


def openai_models(body: Any, model: str) -> ServerLimits | None:
    """`/v1/models`: vLLM's `max_model_len`, or llama.cpp's `meta.n_ctx`, for `model` (or the
    one model served, whatever its name: llama.cpp serves the one it loaded)."""
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, Mapping)]
    named = [e for e in entries if e.get("id") == model or e.get("root") == model]
    chosen = named or (entries if len(entries) == 1 else [])
    for entry in chosen:
        if (window := _positive(entry.get("max_model_len"))) is not None:
            return ServerLimits(window, None, "vLLM /v1/models (max_model_len)")
        meta = entry.get("meta")
        if isinstance(meta, Mapping) and (window := _positive(meta.get("n_ctx"))) is not None:
            return ServerLimits(window, None, "llama.cpp /v1/models (meta.n_ctx)")
    return None


def lmstudio_model(body: Any) -> ServerLimits | None:
    """LM Studio's `/api/v0/models/{model}`: the window it loaded the model with."""
    if not isinstance(body, Mapping):
        return None
    window = _positive(body.get("loaded_context_length"))
    if window is None:
        return None
    return ServerLimits(window, None, "LM Studio /api/v0/models (loaded_context_length)")


_PARAMETER = re.compile(r"^\s*(num_ctx|num_predict)\s+(-?\d+)\s*$", re.MULTILINE)


def ollama_show(body: Any) -> ServerLimits | None:
    """Ollama's `/api/show`: `num_ctx` (and `num_predict`) from the model's parameters."""
    if not isinstance(body, Mapping):
        return None
    parameters = body.get("parameters")
    found = dict(_PARAMETER.findall(parameters)) if isinstance(parameters, str) else {}
    window = _positive(int(found["num_ctx"])) if "num_ctx" in found else None
    output = _positive(int(found["num_predict"])) if "num_predict" in found else None
    if window is None:
        return None
    return ServerLimits(window, output, "Ollama /api/show (num_ctx)")


def ollama_ps(body: Any, model: str) -> ServerLimits | None:
    """Ollama's `/api/ps`: the window `model` is loaded with (OLLAMA_CONTEXT_LENGTH)."""
    models = body.get("models") if isinstance(body, Mapping) else None
    if not isinstance(models, list):
        return None
    for entry in models:
        if isinstance(entry, Mapping) and model in (entry.get("name"), entry.get("model")):
            window = _positive(entry.get("context_length"))
            if window is not None:
                return ServerLimits(window, None, "Ollama /api/ps (context_length)")
    return None


def server_root(base_url: str) -> str:
    """The server's root: the base URL without its trailing `/v1`."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def discover(base_url: str, model: str, *, api_key: str | None = None) -> ServerLimits | None:
    """The window and output limit the server at `base_url` reports for `model`, trying each
    kind of server in turn; None when none answers (nothing is raised: a server that does not
    say is not an error). The standard library's HTTP client: this runs in `ctxr index` on the
    embedded default, which installs no HTTP library of its own."""
    root = server_root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    probes: list[tuple[str, str, dict[str, Any] | None, Callable[[Any], ServerLimits | None]]] = [
        ("GET", f"{root}/props", None, llamacpp_props),
        ("GET", f"{root}/v1/models", None, lambda body: openai_models(body, model)),
        ("GET", f"{root}/api/v0/models/{quote(model, safe='')}", None, lmstudio_model),
        ("POST", f"{root}/api/show", {"model": model}, ollama_show),
        ("GET", f"{root}/api/ps", None, lambda body: ollama_ps(body, model)),
    ]
    for method, url, payload, parse in probes:
        body = _get_json(method, url, payload, headers)
        if body is None:
            continue
        found = parse(body)
        if found is not None:
            return found
    return None


def _get_json(
    method: str, url: str, payload: dict[str, Any] | None, headers: dict[str, str]
) -> Any:
    """The JSON a 200 answer carries, or None for anything else (refused, absent, not JSON)."""
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_SECONDS) as answer:
            if answer.status != 200:
                return None
            return json.loads(answer.read(_MAX_PROBE_BYTES))
    except (OSError, ValueError, urllib.error.URLError):
        return None  # HTTPError (a 404 from a server of another kind) is a URLError
