"""The page at `/` and the JSON it reads, through the real app (no browser: see
test_page_browser.py for that): the open shell and its files, `GET /overview` and
`POST /highlight` under the token rules, their limits, and what they answer.

The overview is read from a copy of the session's examples index, given a ledger and a report
that skipped a file, so the session's index stays as every other test expects it.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.api.highlight import MAX_TEXTS
from ctxr.config import load_settings
from ctxr.enrich.load.walk import Skipped
from ctxr.enrich.situate.ledger import Ledger, ledger_path
from ctxr.index.manifest import Manifest
from ctxr.llm.base import Usage
from ctxr.pipeline.report import IndexReport
from ctxr.pipeline.reports import save_report
from tests.fixtures.index import BuiltIndex

TOKEN = "page-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FIRST_RUN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _ledger(index_dir: Path, when: datetime, usage: Usage, dollars: float | None) -> None:
    ledger = Ledger(cost=None if dollars is None else (lambda _: dollars))
    ledger.begin("anthropic", "claude-haiku-4-5", "situate-v3")
    for n in range(3):
        ledger.record_sent(f"doc{n}")
        ledger.record_request(f"doc{n}")
    ledger.record_usage("doc0", usage)
    ledger.finish()
    ledger.write(ledger_path(index_dir, when))


@pytest.fixture(scope="module")
def index_copy(examples_index: BuiltIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("page") / "idx"
    shutil.copytree(examples_index.index_dir, copy)
    _ledger(copy, FIRST_RUN, Usage(input_tokens=1000, cache_write_tokens=4000,
                                   cache_read_tokens=8000, output_tokens=300), 0.25)  # fmt: skip
    report = IndexReport(index_dir=str(copy), context_kind="llm", files_seen=12)
    report.skipped.append(Skipped("examples/blob.bin", "binary file"))
    report.notices.append("1 file was skipped")
    save_report(report, datetime.now(UTC) + timedelta(seconds=1))  # the newest report
    return copy


@pytest.fixture(scope="module")
def client(index_copy: Path, examples_index: BuiltIndex) -> Iterator[TestClient]:
    settings = load_settings(
        index_dir=index_copy, cache_dir=examples_index.cache_dir, api_token=TOKEN
    )
    with TestClient(create_app(settings)) as opened:
        yield opened


def test_the_shell_and_its_files_are_open_and_local(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "http://" not in page.text and "https://" not in page.text  # no CDN, works offline
    urls = re.findall(r"""(?:src|href)="([^"#]+)\"""", page.text)
    assert any(".js?" in u for u in urls) and any(".css?" in u for u in urls)
    for url in urls:
        if url == "/docs":
            assert client.get(url).status_code == 401  # the API docs keep their token rule
            continue
        response = client.get(url)  # no token: the shell's files hold no data
        assert response.status_code == 200, url
    assert client.get("/ui/nothing.js").status_code == 401  # only the page's own files are open


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/overview"), ("POST", "/highlight")]
)  # fmt: skip
def test_the_data_needs_the_token(client: TestClient, method: str, path: str) -> None:
    body = {"query": "lock", "texts": ["lock"]}
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = client.request(method, path, headers=headers, json=body)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
    assert client.request(method, path, headers=AUTH, json=body).status_code == 200


def test_overview_counts_what_the_index_holds(client: TestClient, index_copy: Path) -> None:
    response = client.get("/overview", headers=AUTH)
    assert response.status_code == 200, response.text
    body = response.json()
    manifest = Manifest.load(index_copy)
    assert body["documents"] == len(manifest.documents) == 10
    assert body["chunks"] == manifest.chunk_count
    assert {g["name"] for g in body["kinds"]} == {"markdown", "code", "text"}
    assert sum(g["chunks"] for g in body["kinds"]) == body["chunks"]
    assert sum(g["documents"] for g in body["kinds"]) == body["documents"]
    assert {g["name"] for g in body["languages"]} == {"go", "python", "typescript"}
    assert {"en", "ja"} <= {g["name"] for g in body["natural_languages"]}
    assert body["contexts"] == [{"name": "outline", "documents": 10, "chunks": body["chunks"],
                                 "tokens": body["tokens"]}]  # fmt: skip
    sizes = body["sizes"]
    assert sum(b["chunks"] for b in sizes["bins"]) == body["chunks"]
    assert sizes["bins"][0]["low"] == 0 and sizes["bins"][-1]["high"] > sizes["max"]
    assert len({b["high"] - b["low"] for b in sizes["bins"]}) == 1  # equal widths
    assert sizes["min"] <= sizes["p10"] <= sizes["median"] <= sizes["p90"] <= sizes["max"]
    assert body["settings"]["embedder"] == manifest.settings.embedder


def test_overview_says_what_the_last_run_skipped_and_every_run(client: TestClient) -> None:
    body = client.get("/overview", headers=AUTH).json()
    last = body["last_run"]
    assert last["skipped_files"] == [{"path": "examples/blob.bin", "reason": "binary file"}]
    assert (last["skipped"], last["files_seen"], last["context_kind"]) == (1, 12, "llm")
    assert last["notices"] == ["1 file was skipped"]
    first = body["runs"][-1]  # the examples index's own build, kept with it
    assert (first["documents_indexed"], first["skipped"]) == (10, 0)
    assert len(body["runs"]) == 2


def test_overview_sums_the_llm_ledgers_and_sees_a_new_one(
    client: TestClient, index_copy: Path
) -> None:
    llm = client.get("/overview", headers=AUTH).json()["llm"]
    assert (llm["runs"], llm["requests"], llm["dollars"], llm["unpriced_runs"]) == (1, 3, 0.25, 0)
    assert llm["tokens"] == {"input": 1000, "cache_write": 4000, "cache_write_1h": 0,
                             "cache_read": 8000, "output": 300}  # fmt: skip
    assert llm["cache_read_share"] == round(8000 / 13000, 4)

    # A later run with a model that has no price: counted, its dollars not guessed.
    _ledger(index_copy, FIRST_RUN + timedelta(days=1), Usage(input_tokens=500), None)
    body = client.get("/overview", headers=AUTH).json()
    assert (body["llm"]["runs"], body["llm"]["requests"]) == (2, 6)
    assert (body["llm"]["dollars"], body["llm"]["unpriced_runs"]) == (0.25, 1)
    newest, older = body["llm_runs"]
    assert newest["dollars"] is None and older["dollars"] == 0.25
    assert newest["model"] == "claude-haiku-4-5" and newest["tokens"]["input"] == 500
    assert older["cache_read_share"] == round(8000 / 13000, 4)


def test_highlight_marks_what_bm25_matched(client: TestClient) -> None:
    texts = ["The migration locks were held.", "東京都の写真", "", "nothing here"]
    response = client.post(
        "/highlight", headers=AUTH, json={"query": "migration lock 東京", "texts": texts}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["terms"] == ["migrat", "lock", "東京"]
    marked = [[t[s:e] for s, e in spans] for t, spans in zip(texts, body["spans"], strict=True)]
    assert marked == [["migration", "locks"], ["東京"], [], []]


@pytest.mark.parametrize(
    ("body", "loc", "kind"),
    [
        ({"query": "x" * 2001, "texts": []}, ["body", "query"], "string_too_long"),
        ({"query": "", "texts": []}, ["body", "query"], "string_too_short"),
        ({"query": "x", "texts": ["t"] * (MAX_TEXTS + 1)}, ["body", "texts"], "too_long"),
        ({"query": "x", "texts": [1]}, ["body", "texts", 0], "string_type"),
        ({"query": "x"}, ["body", "texts"], "missing"),
        ({"query": "x", "texts": [], "k": 3}, ["body", "k"], "extra_forbidden"),
    ],
)
def test_highlight_refuses_what_its_schema_refuses(
    client: TestClient, body: dict[str, Any], loc: list[Any], kind: str
) -> None:
    response = client.post("/highlight", headers=AUTH, json=body)
    assert response.status_code == 422, response.text
    assert any(e["loc"] == loc and e["type"] == kind for e in response.json()["detail"])


def test_highlight_refuses_a_lone_surrogate(client: TestClient) -> None:
    raw = b'{"query": "\\ud800x", "texts": []}'
    headers = {**AUTH, "Content-Type": "application/json"}
    response = client.post("/highlight", headers=headers, content=raw)
    assert response.status_code == 422


def test_the_new_operations_are_in_the_schema_with_their_answers(client: TestClient) -> None:
    paths = client.get("/openapi.json", headers=AUTH).json()["paths"]
    overview, highlight = paths["/overview"]["get"], paths["/highlight"]["post"]
    assert {"200", "401", "503"} <= set(overview["responses"])
    assert {"200", "401", "413", "422", "503"} <= set(highlight["responses"])
    assert overview["security"] == highlight["security"] == [{"bearer": []}]
    assert "/" not in paths and not any(p.startswith("/ui") for p in paths)


def test_without_an_index_the_page_opens_and_the_data_says_why(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "none")
    with TestClient(create_app(settings)) as bare:
        assert bare.get("/").status_code == 200
        response = bare.get("/overview")
        assert response.status_code == 503 and "ctxr index" in response.json()["detail"]
        bad = bare.post("/highlight", json={"query": "x", "texts": ["x"]})
        assert bad.status_code == 503
