"""The schema at /openapi.json says what the server does, and /docs and /redoc need no network.

What the schema promises is checked against what the server answers: the search body's
"exactly one of query or queries" (`oneOf`), the bearer token (`securitySchemes`, on the
operations that need it), and the answers the guard gives before any route runs (421, 403,
408, 413, 503, 401). Most tests need no index: the app starts without one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.config import load_settings
from ctxr.index.owner import Owner
from tests.fixtures.index import BuiltIndex

TOKEN = "openapi-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GUARD_ANSWERS = {"403", "421", "503"}  # any path: Origin, Host, the connection cap
BODY_ANSWERS = {"408", "413", "422"}  # any POST: body deadline, body size, validation


@pytest.fixture
def schema_app(tmp_path: Path) -> Iterator[TestClient]:
    settings = load_settings(index_dir=tmp_path / "none", api_token=TOKEN)
    owner = Owner.for_this_process("http://127.0.0.1:1")
    with TestClient(create_app(settings, owner)) as client:
        yield client


def _schema(client: TestClient, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = client.get("/openapi.json", headers=headers or {})
    assert response.status_code == 200, response.text
    schema: dict[str, Any] = response.json()
    return schema


def test_the_bearer_token_is_a_security_scheme_on_the_operations_that_need_it(
    schema_app: TestClient, tmp_path: Path
) -> None:
    schema = _schema(schema_app, AUTH)
    schemes = schema["components"]["securitySchemes"]
    assert schemes == {"bearer": {"type": "http", "scheme": "bearer", "description": schemes[
        "bearer"]["description"]}}  # fmt: skip
    assert "CTXR_API_TOKEN" in schemes["bearer"]["description"]
    paths = schema["paths"]
    for path, method in [("/search", "post"), ("/stats", "get"), ("/documents/{doc_id}", "get"),
                         ("/index/update", "post")]:  # fmt: skip
        operation = paths[path][method]
        assert operation["security"] == [{"bearer": []}], path
        assert "401" in operation["responses"], path
    health = paths["/health"]["get"]
    assert "security" not in health and "401" not in health["responses"]  # answers everyone

    # Without CTXR_API_TOKEN only the write endpoint needs a token (the owner's or the
    # update token), and only it answers 401.
    settings = load_settings(index_dir=tmp_path / "none")
    with TestClient(create_app(settings, Owner.for_this_process("http://127.0.0.1:1"))) as bare:
        paths = _schema(bare)["paths"]
    assert "security" not in paths["/search"]["post"]
    assert "401" not in paths["/search"]["post"]["responses"]
    update = paths["/index/update"]["post"]
    assert update["security"] == [{"bearer": []}]
    assert {"401", "403", "409", "410", "503"} <= set(update["responses"])


def test_the_guards_answers_are_declared_on_every_operation(schema_app: TestClient) -> None:
    for path, methods in _schema(schema_app, AUTH)["paths"].items():
        for method, operation in methods.items():
            declared = set(operation["responses"])
            assert declared >= GUARD_ANSWERS, (path, method, declared)
            if method == "post":
                assert declared >= BODY_ANSWERS, (path, declared)
            error = operation["responses"]["421"]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/ErrorResponse"}


def test_search_body_says_exactly_one_of_query_or_queries_as_the_server_does(
    examples_index: BuiltIndex,
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    settings = examples_index.settings_with()
    bodies: list[dict[str, Any]] = [
        {"query": "lock"},
        {"queries": ["lock", "cache"]},
        {"query": "lock", "queries": ["cache"]},  # both: before, the schema allowed it
        {},
        {"query": None, "queries": ["cache"]},
        {"query": "lock", "queries": None},
        {"query": None, "queries": None},
        {"query": "lock", "k": 3, "mode": "bm25"},
        {"query": "lock", "k": 3.0, "candidates": 50.0},  # JSON's 3.0 is the integer 3
        {"query": "lock", "k": 2.5},
        # The filter language, field by field, as the server reads it.
        {"query": "lock", "filters": {"source": "examples/docs/**/*.md", "index": [0, 1.0]}},
        {"query": "lock", "filters": {"source": ["./examples/", " *.md "], "meta.tags": 3}},
        {"query": "lock", "filters": {"token_count": {"gte": 5, "lt": 1e9}, "kind": []}},
        {"query": "lock", "filters": {"source": "examples/*/faq.md"}},  # a glob it cannot match
        {"query": "lock", "filters": {"source": "  "}},
        {"query": "lock", "filters": {"colour": "red"}},
        {"query": "lock", "filters": {"meta.two words": "x", "kind": "markdown"}},
        {"query": "lock", "filters": {"kind": {"gte": 1}}},
        {"query": "lock", "filters": {"start": {"above": 1}}},
        {"query": "lock", "filters": {"doc_id": {"not": ["a.md", "b"]}, "meta.tags": {"not": 3}}},
        {"query": "lock", "filters": {"source": {"not": "examples/docs/"}}},
        {"query": "lock", "filters": {"token_count": {"not": {"lt": 20}}}},
        {"query": "lock", "filters": {"token_count": {"not": 3, "gte": 1}}},
        {"query": "lock", "filters": {"kind": {"not": {"not": "code"}}}},
        {"query": "lock", "filters": {"kind": {"not": []}}},
        {"query": "lock", "filters": {"source": {"not": "examples/*/faq.md"}}},
        {"query": "lock", "rerank": "cross-encoder"},  # no model on this server
    ]
    with TestClient(create_app(settings)) as client:
        schema = _schema(client)
        body_schema = schema["paths"]["/search"]["post"]["requestBody"]["content"][
            "application/json"]["schema"]  # fmt: skip
        validator = jsonschema.Draft202012Validator({**schema, **body_schema})
        for body in bodies:
            allowed = validator.is_valid(body)
            status = client.post("/search", json=body).status_code
            assert status == (200 if allowed else 422), (body, allowed, status)
    search = schema["components"]["schemas"]["SearchRequest"]
    assert len(search["oneOf"]) == 2


def test_docs_and_redoc_load_only_from_the_server_itself(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "none")
    with TestClient(create_app(settings)) as client:
        for page in ("/docs", "/redoc"):
            response = client.get(page)
            assert response.status_code == 200 and "text/html" in response.headers["content-type"]
            urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", response.text)
            assert urls, response.text
            for url in urls:  # nothing from a CDN, fonts included: /docs works offline
                assert url.startswith("/") and not url.startswith("//"), (page, url)
                assert client.get(url).status_code == 200, url
            assert "https://" not in response.text and "http://" not in response.text
        script = client.get("/docs/assets/swagger-ui-bundle.js")
        assert "javascript" in script.headers["content-type"] and len(script.content) > 100_000


def test_docs_keep_the_token_rules(schema_app: TestClient) -> None:
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/assets/swagger-ui.css"):
        assert schema_app.get(path).status_code == 401, path
        assert schema_app.get(path, headers=AUTH).status_code == 200, path


def test_the_schema_is_valid_openapi(schema_app: TestClient) -> None:
    validator = pytest.importorskip(
        "openapi_spec_validator", reason="openapi-spec-validator is in the api-test extra"
    )
    validator.validate(_schema(schema_app, AUTH))
