"""Grouped situating: several chunks of one document per request, answers mapped back by id,
what is missing or wrong asked again alone; the real SDKs against the loopback fake server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import load_settings
from ctxr.enrich.situate.group import (
    ANSWER_SCHEMA,
    ask_for,
    group_request,
    named_schema,
    parse_answers,
)
from ctxr.enrich.situate.plan import duplicates_of, plan_groups
from ctxr.llm.registry import make_llm
from ctxr.pipeline.build import build_index
from ctxr.pipeline.report import IndexReport
from ctxr.types import Chunk, chunk_id_for
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.llm_wire import asked_ids, default_respond
from tests.fixtures.corpora import write_topics
from tests.fixtures.environment import use_fake_llm

_QUOTED = re.compile(r'<chunk id="(c\d+)">')


def _chunk(index: int, text: str, trail: tuple[str, ...] = ()) -> Chunk:
    return Chunk(chunk_id_for("doc", index), "doc", index, text, 0, len(text), 3, trail)


def test_identical_chunks_are_asked_once_then_packed_by_size() -> None:
    chunks = [_chunk(i, t) for i, t in enumerate(["a", "b", "a", "c", "d", "b", "e"])]
    groups = plan_groups(chunks, 2)
    assert [[c.text for c in g] for g in groups] == [["a", "b"], ["c", "d"], ["e"]]
    copies = duplicates_of(chunks)
    assert {k: [c.index for c in v] for k, v in copies.items()} == {
        chunks[0].chunk_id: [2],
        chunks[1].chunk_id: [5],
    }
    # Same text under another heading is another question.
    assert len(plan_groups([_chunk(0, "a", ("X",)), _chunk(1, "a", ("Y",))], 1)) == 2


def test_answers_map_by_id_in_any_order() -> None:
    shuffled = {"contexts": [{"id": "c2", "context": " two "}, {"id": "c1", "context": "one"}]}
    assert parse_answers(json.dumps(shuffled), ["c1", "c2"]) == {"c1": "one", "c2": "two"}
    fenced = "```json\n" + json.dumps({"contexts": [{"id": "c1", "context": "x"}]}) + "\n```"
    assert parse_answers(fenced, ["c1"]) == {"c1": "x"}
    stray = {"contexts": [{"id": "c9", "context": "?"}, {"id": "c1", "context": 3}, "junk"]}
    assert parse_answers(json.dumps(stray), ["c1", "c2"]) == {}
    assert parse_answers("Sure! Here are the contexts.", ["c1", "c2"]) == {}
    named = {"c2": "two", "c1": " one", "c7": "stray", "c3": 4}
    assert parse_answers(json.dumps(named), ["c1", "c2", "c3"]) == {"c1": "one", "c2": "two"}
    bare = [{"id": "c1", "context": "bare list"}]
    assert parse_answers(json.dumps(bare), ["c1"]) == {"c1": "bare list"}


def test_request_bodies_carry_the_schema_and_one_cached_document() -> None:
    chunks = (_chunk(0, "alpha", ("Guide",)), _chunk(1, "beta"))
    request = group_request("the document", chunks, True, 600)
    assert request.json_schema == ANSWER_SCHEMA and _QUOTED.findall(request.instruction) == [
        "c1",
        "c2",
    ]
    assert "Chunk c1 sits under: Guide" in request.instruction
    anthropic = make_llm("anthropic", "claude-haiku-4-5", api_key="x").request_body(request)
    document, instruction = anthropic["messages"][0]["content"]
    assert document["cache_control"] == {"type": "ephemeral"} and "the document" in document["text"]
    assert "cache_control" not in instruction
    assert anthropic["tool_choice"] == {"type": "tool", "name": anthropic["tools"][0]["name"]}
    assert anthropic["tools"][0]["input_schema"] == ANSWER_SCHEMA
    openai = make_llm("openai", "gpt-4o-mini", api_key="x").request_body(request)
    assert openai["response_format"]["json_schema"]["strict"] is True
    assert openai["messages"][0]["content"].startswith(request.prefix)


def test_a_whole_document_is_sent_once_with_its_chunks_marked_in_place() -> None:
    text = "alpha beta gamma delta epsilon"
    spans = [("alpha beta", 0, ("Intro",)), ("gamma delta", 11, ()), ("epsilon", 23, ())]
    chunks = [
        Chunk(chunk_id_for("doc", i), "doc", i, s, at, at + len(s), 2, trail)
        for i, (s, at, trail) in enumerate(spans)
    ]
    marked = "[[c1]]alpha beta[[/c1]] [[c2]]gamma delta[[/c2]] [[c3]]epsilon[[/c3]]"
    uncached = ask_for(text, True, chunks, chunks[:2], False, 200)
    assert marked in uncached.request.prefix and uncached.ids == ("c1", "c2")
    assert "alpha beta" not in uncached.request.instruction
    # The chunk sits under its headings in the marked text itself: no trail line is sent.
    assert "sits under" not in uncached.request.instruction
    assert uncached.request.json_schema == named_schema(["c1", "c2"])  # names every chunk
    # Cached: every request of the document reads one prefix under one schema.
    first = ask_for(text, True, chunks, chunks[:2], True, 200)
    second = ask_for(text, True, chunks, chunks[2:], True, 200)
    assert second.ids == ("c3",) or len(chunks[2:]) == 1
    assert first.request.prefix == second.request.prefix or len(chunks[2:]) == 1
    other = ask_for(text, True, chunks, [chunks[0], chunks[2]], True, 200)
    assert other.request.prefix == first.request.prefix and other.ids == ("c1", "c3")
    assert first.request.json_schema == other.request.json_schema == ANSWER_SCHEMA
    # A window of a long document is not the document: its chunks are quoted after it.
    window = ask_for(text, False, chunks, chunks[:2], True, 200)
    assert "[[c1]]" not in window.request.prefix and "alpha beta" in window.request.instruction


def _run(
    tmp_path: Path, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, provider: str
) -> IndexReport:
    use_fake_llm(monkeypatch, server, provider)
    settings = load_settings(
        index_dir=tmp_path / "idx", chunk_tokens=80, context="llm", llm_group_size=4
    )
    corpus = write_topics(tmp_path / "corpus", ("glaciers", "tides"), sections=6, facts=10)
    return build_index([corpus], settings, embedder=HashEmbedder())


def _messages(server: FakeLLMServer) -> list[Any]:
    return [r for r in server.requests if r.endpoint in ("messages", "chat.completions")]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_missing_or_bad_context_is_asked_again_alone(
    tmp_path: Path,
    fake_llm_factory: Callable[..., FakeLLMServer],
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
) -> None:
    def respond(body: Any) -> str:
        answer = default_respond(body)
        asked = asked_ids(body)
        if len(asked) < 2:
            return answer  # a chunk asked alone, or a group of one
        missing, bad = asked[1], asked[2] if len(asked) > 2 else None
        refusal = "I'm sorry, I cannot help with that."  # not a context
        data = json.loads(answer)
        if "contexts" not in data:  # named: {"c5": ...}
            named = {k: refusal if k == bad else v for k, v in data.items() if k != missing}
            return json.dumps(dict(reversed(named.items())))  # one left out, out of order
        kept = [c for c in data["contexts"] if c["id"] != missing]
        for c in kept:
            if c["id"] == bad:
                c["context"] = refusal
        return json.dumps({"contexts": kept[::-1]})

    server = fake_llm_factory(respond=respond)
    report = _run(tmp_path, server, monkeypatch, provider)
    summary = report.contexts
    assert summary is not None and summary.failures == 0 and summary.flagged == 0
    sent = _messages(server)
    sizes = [len(asked_ids(r.body)) for r in sent]
    grouped = [n for n in sizes if n >= 2]
    # The second chunk of every group is asked again alone, and so is the third.
    reasks = sum(1 + (n >= 3) for n in grouped)
    assert grouped and summary.retries == reasks and summary.requests == len(sent)
    assert sizes.count(0) == reasks  # the requests without ids are exactly the re-asks
    assert report.chunks_written == sum(sizes)


def test_a_server_without_structured_outputs_gets_json_in_words(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(refuse_schemas=True)
    report = _run(tmp_path, server, monkeypatch, "openai")
    assert report.contexts is not None and report.contexts.failures == 0
    refused = [r for r in _messages(server) if r.status == 400]
    answered = [r for r in _messages(server) if r.status == 200]
    assert refused and all("response_format" in r.body for r in refused)
    assert answered and all("response_format" not in r.body for r in answered)
    assert report.contexts.sent == len(refused) + len(answered)
    assert report.contexts.requests == len(answered)  # a refusal is no answer
    assert report.contexts.retries == 0  # every answer in words named every chunk


def test_a_prefix_is_cached_only_where_its_requests_earn_back_the_write() -> None:
    from ctxr.enrich.situate.plan import worth_caching

    assert not worth_caching(1, "5m") and not worth_caching(1, "1h")
    assert worth_caching(2, "5m") and not worth_caching(2, "1h")  # 1.35x vs 2x; 2.1x vs 2x
    assert worth_caching(3, "1h") and worth_caching(30, "5m")


def test_a_cacheable_document_asked_in_one_request_is_sent_unmarked(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(min_cacheable={"claude": 1024})
    use_fake_llm(monkeypatch, server)
    root = tmp_path / "corpus"
    root.mkdir()
    facts = " ".join(f"Fact {j} about tides holds at {j * 7}." for j in range(300))
    (root / "tides.md").write_text(f"# Tides\n\n{facts}\n")  # ~3,000 tokens, few chunks
    settings = load_settings(
        index_dir=tmp_path / "idx", chunk_tokens=800, context="llm", llm_group_size=16
    )
    monkeypatch.setenv("CTXR_LLM_PROVIDER", "anthropic")
    report = build_index([root], settings, embedder=HashEmbedder())
    sent = _messages(server)
    assert len(sent) == 1 and report.chunks_written > 1  # every chunk in one request
    assert "cache_control" not in json.dumps(sent[0].body)
    assert report.contexts is not None and report.contexts.cache_write_tokens == 0


def test_an_answer_cut_short_keeps_the_contexts_it_finished() -> None:
    from ctxr.enrich.situate.group import MAX_GROUP_OUTPUT_TOKENS, output_budget

    named = '{"c1": "one \\"quoted\\"", "c2": "two", "c3": "thr'
    assert parse_answers(named, ["c1", "c2", "c3"]) == {"c1": 'one "quoted"', "c2": "two"}
    listed = '{"contexts": [{"id": "c2", "context": "two"}, {"id": "c1", "context": "on'
    assert parse_answers(listed, ["c1", "c2"]) == {"c2": "two"}
    # 64 contexts of 200 tokens would ask 13,584 tokens; a request asks at most 8,192.
    assert output_budget(4, 200) == 4 * 212 + 16
    assert output_budget(64, 200) == MAX_GROUP_OUTPUT_TOKENS == 8192
