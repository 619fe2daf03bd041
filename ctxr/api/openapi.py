"""The schema at /openapi.json, completed with what the guard answers before any route runs.

FastAPI writes each operation's own answers (its body, 404, 422, the index's 503). The guard
(`ctxr.api.guard`) and uvicorn answer for every path before routing, so their answers are
added here to every operation, where they apply, with the error body they send:

- 421 (a Host this server does not answer), 403 (an Origin elsewhere), 503 (past
  CTXR_API_MAX_CONNECTIONS, uvicorn's plain-text answer) on every operation;
- 400 (a malformed Content-Length), 408 (a body not in within CTXR_API_BODY_TIMEOUT), 413 (a
  body over CTXR_API_MAX_BODY_BYTES) on those that take a body;
- the bearer token as the `bearer` security scheme, with 401, on the operations that need it:
  all but the open ones (/health) where CTXR_API_TOKEN is set, and the private ones (the live
  index's write endpoint) always, with 403 for a token that may search but not write.

A client generator then knows the token, and a fuzzer (schemathesis) finds every answer it
gets declared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from ctxr.api.models import ErrorResponse

SCHEME = "bearer"
_ERROR = {"$ref": "#/components/schemas/ErrorResponse"}
_BODY_METHODS = frozenset({"post", "put", "patch"})

_EVERY: dict[str, str] = {
    "403": "the Origin header names a site this server does not answer (a page elsewhere)",
    "421": "the Host header names a host this server does not answer; add it with "
    "--allowed-host or CTXR_API_ALLOWED_HOSTS",
}
_WITH_BODY: dict[str, str] = {
    "400": "a malformed Content-Length header",
    "408": "the body did not arrive within CTXR_API_BODY_TIMEOUT seconds (connection closed)",
    "413": "the body is over CTXR_API_MAX_BODY_BYTES",
}
_CONNECTIONS = "or the server has CTXR_API_MAX_CONNECTIONS connections open (plain text)"
_UNAUTHORISED = "missing or wrong bearer token"
_PRIVATE_403 = (
    "a client not on the server's machine, a token that may only search (CTXR_API_TOKEN), or "
    "a root outside those the index may read"
)


def complete_schema(
    app: FastAPI,
    *,
    token: bool,
    open_paths: frozenset[str],
    private_paths: frozenset[str],
) -> None:
    """Make `app.openapi` add the guard's answers and the bearer scheme (`token`: whether
    CTXR_API_TOKEN is set)."""
    written: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _complete(written(), token, open_paths, private_paths)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]


def _complete(
    schema: dict[str, Any], token: bool, open_paths: frozenset[str], private: frozenset[str]
) -> None:
    components = schema.setdefault("components", {})
    components.setdefault("schemas", {}).setdefault(
        "ErrorResponse",
        ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}"),
    )
    guarded = False
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            answers = operation.setdefault("responses", {})
            for status, why in _EVERY.items():
                _add(answers, status, why)
            if method in _BODY_METHODS:
                for status, why in _WITH_BODY.items():
                    _add(answers, status, why)
            _add_connection_cap(answers)
            if path in private or (token and path not in open_paths):
                guarded = True
                operation["security"] = [{SCHEME: []}]
                _add(answers, "401", _UNAUTHORISED)
            if path in private:
                answers["403"]["description"] = _PRIVATE_403
    if guarded:
        components["securitySchemes"] = {
            SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "description": "Authorization: Bearer <CTXR_API_TOKEN>. The live index's "
                "write endpoint takes the owner file's token (what `ctxr watch` sends) or "
                "CTXR_API_UPDATE_TOKEN instead, even where no CTXR_API_TOKEN is set.",
            }
        }


def _add(answers: dict[str, Any], status: str, why: str) -> None:
    if status not in answers:
        answers[status] = {"description": why, "content": {"application/json": {"schema": _ERROR}}}


def _add_connection_cap(answers: dict[str, Any]) -> None:
    answer = answers.setdefault("503", {"description": "the server cannot answer now"})
    answer["description"] = f"{answer['description']}, {_CONNECTIONS}"
    content = answer.setdefault("content", {})
    content.setdefault("application/json", {"schema": _ERROR})
    content.setdefault("text/plain", {"schema": {"type": "string"}})
