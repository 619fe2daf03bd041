"""Wire formats of the fake LLM server: prompt parsing, token counting, response and error bodies.

Token-counting rule (the cost estimate is compared against it, so it is public and simple):

- A request's prompt is a list of text *parts*. Anthropic: the ``system`` string or each of
  its blocks, then each message's content string or each of its content blocks, in order.
  OpenAI: each message's content string or each of its text parts, in order.
- Each part is counted on its own with tiktoken and the counts are summed; roles and block
  framing cost nothing, tool definitions count as their JSON text, and a forced tool call
  (`tool_choice` "any" or "tool") adds Anthropic's documented tool-use system prompt
  (``FORCED_TOOL_PROMPT_TOKENS``) as a first, hidden part. Summing per part keeps the count
  additive, so a cached prefix (parts up to and including a breakpoint) plus the rest is
  exactly the total.
- Encoding: ``o200k_base`` for OpenAI ``gpt-4o*``, ``gpt-4.1*``, ``gpt-5*``, ``o1*``, ``o3*``,
  ``o4*``; ``cl100k_base`` for everything else, Claude models included.
- Output tokens: the response text counted with the same encoding.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxr.tokens import count_tokens, get_encoding

Provider = Literal["anthropic", "openai"]

# Minimum cacheable prompt length per Claude model, matched by longest prefix; overridable per
# server instance. Anthropic's prompt-caching docs (as quoted in anthropic-sdk-python#1194):
# Opus 4.5/4.6 and Haiku 4.5 4,096; Haiku 3.5/3 2,048; Sonnet 3.7/4/4.5/4.6, Opus 4/4.1 1,024.
# Newer models from a secondary write-up (unverified): Opus 4.7 2,048; Opus 4.8 and Sonnet 5
# 1,024; Opus 5, Fable 5, Mythos 5 512. Unlisted models (e.g. Haiku 5.5) get the default.
ANTHROPIC_MIN_CACHEABLE: dict[str, int] = {
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-opus-4-7": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-sonnet-4": 1024,
    "claude-opus-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-3-opus": 1024,
    "claude-sonnet-5": 1024,
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
}
DEFAULT_MIN_CACHEABLE = 1024
# The system prompt Anthropic adds to a request that forces a tool call, per its tool-use
# pricing table: 313 tokens on Claude 4 models (Haiku 4.5 included), 340 on Haiku 3.5.
FORCED_TOOL_PROMPT_TOKENS: dict[str, int] = {"claude-3-5-haiku": 340}
DEFAULT_FORCED_TOOL_PROMPT_TOKENS = 313
OPENAI_MIN_CACHEABLE = 1024
OPENAI_CACHE_INCREMENT = 128
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4")


class BadRequest(ValueError):
    """The request body is not something the real API would accept (answered with a 400)."""


@dataclass(frozen=True, slots=True)
class PromptPart:
    text: str
    breakpoint: bool = False  # carries cache_control (Anthropic)
    ttl: str = "5m"  # cache_control's ttl: "5m" or "1h"
    hidden_tokens: int = 0  # billed without text: the tool-use system prompt


def min_cacheable_tokens(model: str, table: Mapping[str, int] | None = None) -> int:
    """The minimum cacheable prefix for a Claude ``model`` (longest matching table prefix)."""
    table = ANTHROPIC_MIN_CACHEABLE if table is None else table
    matches = [prefix for prefix in table if model.startswith(prefix)]
    return table[max(matches, key=len)] if matches else DEFAULT_MIN_CACHEABLE


def encoding_for_model(model: str) -> str:
    return "o200k_base" if model.startswith(_O200K_PREFIXES) else "cl100k_base"


@functools.lru_cache(maxsize=4096)  # the same document arrives once per chunk
def count_text_tokens(text: str, model: str) -> int:
    return count_tokens(text, encoding_for_model(model))


@functools.lru_cache(maxsize=4096)
def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _block_text(block: Any) -> str:
    if not isinstance(block, Mapping):
        raise BadRequest(f"content block must be an object, got {type(block).__name__}")
    kind = block.get("type")
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise BadRequest("text block without a string 'text'")
        return str(block["text"])
    if kind == "document" and isinstance(block.get("source"), Mapping):
        source = block["source"]
        if source.get("type") == "text":
            return str(source.get("data", ""))
        if source.get("type") == "content" and isinstance(source.get("content"), list):
            return "".join(_block_text(b) for b in source["content"])
    rest = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(rest, sort_keys=True)  # images, tool blocks: counted as their JSON


def _part(block: Any) -> PromptPart:
    text = _block_text(block)
    control = block.get("cache_control") if isinstance(block, Mapping) else None
    if isinstance(control, Mapping) and control.get("type") == "ephemeral":
        return PromptPart(text, breakpoint=True, ttl=str(control.get("ttl", "5m")))
    return PromptPart(text)


def _content_parts(content: Any) -> list[PromptPart]:
    if isinstance(content, str):
        return [PromptPart(content)]
    if isinstance(content, list):
        return [_part(block) for block in content]
    raise BadRequest("content must be a string or a list of content blocks")


def _require(body: Mapping[str, Any], provider: Provider) -> list[Any]:
    if not isinstance(body, Mapping):
        raise BadRequest("request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("model: field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: a non-empty list is required")
    for message in messages:
        if not isinstance(message, Mapping) or "content" not in message:
            raise BadRequest("messages: each message needs a role and content")
        if provider == "anthropic" and message.get("role") not in ("user", "assistant"):
            raise BadRequest("messages: roles must be 'user' or 'assistant'")
    return messages


def prompt_parts(body: Mapping[str, Any], provider: Provider) -> list[PromptPart]:
    """The prompt's text parts in order (see the module docstring); raises `BadRequest`."""
    messages = _require(body, provider)
    parts: list[PromptPart] = []
    if provider == "anthropic" and body.get("tools"):
        # Tool definitions come first in Claude's prompt (tools, system, messages), so they are
        # part of every cached prefix and billed as input; counted as their JSON text, after
        # the tool-use system prompt a forced call adds.
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
            model = str(body["model"])
            hidden = next((n for k, n in FORCED_TOOL_PROMPT_TOKENS.items() if model.startswith(k)),
                          DEFAULT_FORCED_TOOL_PROMPT_TOKENS)  # fmt: skip
            parts.append(PromptPart("", hidden_tokens=hidden))
        parts.append(PromptPart(json.dumps(body["tools"], ensure_ascii=False, sort_keys=True)))
    if provider == "anthropic" and body.get("system") is not None:
        parts.extend(_content_parts(body["system"]))
    for message in messages:
        if provider == "openai" and message.get("content") is None:
            continue
        parts.extend(_content_parts(message["content"]))
    if provider == "anthropic" and isinstance(body.get("cache_control"), Mapping) and parts:
        # Automatic caching: a top-level cache_control puts the breakpoint on the last block.
        ttl = str(body["cache_control"].get("ttl", "5m"))
        parts[-1] = PromptPart(parts[-1].text, breakpoint=True, ttl=ttl)
    return parts


def count_request_tokens(body: Mapping[str, Any], provider: Provider) -> int:
    """Input tokens of a Messages / Chat Completions request body, by the module's rule."""
    model = str(body.get("model", ""))
    parts = prompt_parts(body, provider)
    return sum(count_text_tokens(p.text, model) + p.hidden_tokens for p in parts)


def prefix_hash(model: str, parts: Sequence[PromptPart]) -> str:
    """Identity of a cached prefix: the model and the exact text of every part up to it."""
    digest = hashlib.sha256(model.encode())
    for part in parts:
        digest.update(b"\x00" + _digest(part.text))
    return digest.hexdigest()[:16]


_DOC = re.compile(r"<document>\s*(.*?)\s*</document>", re.S)
_CHUNK = re.compile(r"<chunk>\s*(.*?)\s*</chunk>", re.S)
_GROUP_CHUNK = re.compile(r'<chunk id="([^"]+)">\s*(.*?)\s*</chunk>', re.S)
_MARKED_CHUNK = re.compile(r"\[\[(c\d+)\]\](.*?)\[\[/\1\]\]", re.S)  # marked in place
_ASKED = re.compile(r"^Situate these \d+ chunks: ([c\d, ]+)\.$", re.M)


def asked_ids(body: Mapping[str, Any]) -> list[str]:
    """The chunk ids a grouped request asks about: quoted after the document, or named by the
    instruction of a document whose chunks are marked in place; [] for a one-chunk request."""
    text = "\n".join(p.text for p in prompt_parts(body, _provider_of(body)))
    if found := _ASKED.search(text):
        return [i.strip() for i in found.group(1).split(",")]
    return [i for i, _ in _GROUP_CHUNK.findall(text)]


def named_answer(body: Mapping[str, Any]) -> bool:
    """Whether the request's schema names the chunks ({"c1": ...}) rather than listing them."""
    tools = body.get("tools") or []
    schema = tools[0].get("input_schema") if tools else None
    if schema is None:
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
    return isinstance(schema, dict) and "contexts" not in schema.get("properties", {})


def _provider_of(body: Mapping[str, Any]) -> Provider:
    try:
        prompt_parts(body, "anthropic")
    except BadRequest:  # an OpenAI body with a "system" role
        return "openai"
    return "anthropic"


def context_for(document: str, chunk: str) -> str:
    """The fake model's context for one chunk: the document's first line, the chunk's words."""
    first_line = next((ln.strip() for ln in document.splitlines() if ln.strip()), "the document")
    title = first_line.lstrip("#/*-; ").strip()[:80] or "the document"
    words = " ".join(chunk.split()[:8]) or "an empty passage"
    return f"This chunk is from {title} and covers {words}."


def default_respond(body: Mapping[str, Any]) -> str:
    """A deterministic, plausible context: names the document's first line and the chunk's
    first words. Uses <document>/<chunk> tags when present, else the longest and last parts."""
    try:
        parts = prompt_parts(body, "anthropic")
    except BadRequest:  # an OpenAI body with a "system" role
        parts = prompt_parts(body, "openai")
    text = "\n".join(p.text for p in parts)
    doc_match, chunk_match = _DOC.search(text), _CHUNK.search(text)
    longest = max(parts, key=lambda p: len(p.text)).text
    document = doc_match.group(1) if doc_match else longest
    if asked := asked_ids(body):  # a grouped request: JSON, a context per chunk asked about
        # A pack holds several documents: each id is situated in the one that marks it.
        owner: dict[str, tuple[str, str]] = {}
        for each in _DOC.findall(text) or [document]:
            for i, chunk_text in _MARKED_CHUNK.findall(each):
                owner[i] = (each, chunk_text)
        for i, chunk_text in _GROUP_CHUNK.findall(text):
            owner[i] = (document, chunk_text)
        answers = {i: context_for(*owner.get(i, (document, ""))) for i in asked}
        if named_answer(body):
            return json.dumps(answers)
        return json.dumps({"contexts": [{"id": i, "context": c} for i, c in answers.items()]})
    chunk = chunk_match.group(1) if chunk_match else parts[-1].text
    return context_for(document, chunk)


def truncate_to_tokens(text: str, limit: int, model: str) -> tuple[str, bool]:
    """``text`` cut to ``limit`` output tokens, and whether it was cut."""
    encoding = get_encoding(encoding_for_model(model))
    tokens = encoding.encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text, False
    return encoding.decode(tokens[:limit]), True


def forced_tool(body: Mapping[str, Any]) -> str | None:
    """The tool an Anthropic request forces (`tool_choice` of type "tool"), if any."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        return str(choice.get("name"))
    return None


def tool_input(text: str) -> dict[str, Any]:
    """A forced tool call's input: the answer as a JSON object (a model bound to a schema
    always produces one; a scripted answer that is not one is wrapped, not dropped)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"value": value}


def anthropic_message(
    model: str, text: str, usage: Mapping[str, Any], cut: bool, tool: str | None = None
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if tool is not None:
        content = [
            {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": tool,
             "input": tool_input(text)}
        ]  # fmt: skip
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "max_tokens" if cut else "tool_use" if tool else "end_turn",
        "stop_sequence": None,
        "usage": dict(usage),
    }


def openai_completion(model: str, text: str, usage: Mapping[str, Any], cut: bool) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "length" if cut else "stop",
            }
        ],
        "usage": dict(usage),
    }


# (status, anthropic error type, openai error type, openai code, message) per error kind.
ERRORS: dict[str, tuple[int, str, str, str | None, str]] = {
    "429": (429, "rate_limit_error", "requests", "rate_limit_exceeded", "Rate limit exceeded"),
    "529": (529, "overloaded_error", "server_error", "overloaded", "Overloaded"),
    "500": (500, "api_error", "server_error", None, "Internal server error"),
    "400": (400, "invalid_request_error", "invalid_request_error", None, "Invalid request"),
    "401": (401, "authentication_error", "invalid_request_error", "invalid_api_key", "Bad key"),
    "404": (404, "not_found_error", "invalid_request_error", "unknown_url", "Not found"),
}


def error_body(kind: str, provider: Provider, message: str | None = None) -> tuple[int, bytes]:
    """Status and JSON body of an error in ``provider``'s shape. OpenAI has no 529: an
    overloaded OpenAI server answers 503."""
    status, a_type, o_type, o_code, default = ERRORS[kind]
    message = message or default
    if provider == "anthropic":
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": a_type, "message": message},
            "request_id": f"req_{uuid.uuid4().hex[:24]}",
        }
    else:
        status = 503 if status == 529 else status
        body = {"error": {"message": message, "type": o_type, "param": None, "code": o_code}}
    return status, json.dumps(body).encode()
