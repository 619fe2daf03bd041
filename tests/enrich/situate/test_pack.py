"""Packs: the chunks of several small documents situated in one request (planned in
ctxr/enrich/situate/plan.py, rendered in group.py); planning, the request, shared usage, and
runs through the real SDKs against the loopback fake server, answers shuffled or missing an id,
estimate against run."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import load_settings
from ctxr.enrich.situate.group import named_schema, pack_ask
from ctxr.enrich.situate.plan import Planned, plan_packs, plan_prefix, share_usage
from ctxr.enrich.situate.window import Prefix, Window
from ctxr.llm.base import Usage
from ctxr.pipeline.build import build_index
from ctxr.pipeline.estimate import estimate_paths
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.llm_wire import asked_ids, default_respond
from tests.fixtures.documents import chunked_document
from tests.fixtures.environment import use_fake_llm


def _planned(
    name: str, words: list[str], tokens: int, cache: bool = False, group_size: int = 8
) -> Planned:
    document, chunks = chunked_document(name, words, separator=" ", count_tokens=lambda _: 1)
    prefix = Prefix(document, Window(document.text, None, tuple(chunks)), tokens, cache, 0)
    return plan_prefix(prefix, chunks, group_size, "5m")


def test_packs_fill_greedily_and_keep_what_cannot_be_packed_alone() -> None:
    small = [_planned(f"s{i}.md", ["a", "b", "c"], 1000) for i in range(5)]
    cached = _planned("big.md", [f"w{i}" for i in range(30)], 9000, cache=True)
    several = _planned("long.md", [f"x{i}" for i in range(20)], 3000)  # 3 groups of 8
    units = plan_packs([small[0], small[1], cached, small[2], several, small[3], small[4]],
                       max_chunks=8, max_tokens=2500)  # fmt: skip
    names = [[m.prefix.document.source for m in unit] for unit in units]
    # Two of three chunks fit 8; 2,500 tokens hold two documents of 1,000.
    assert names == [["big.md"], ["s0.md", "s1.md"], ["long.md"], ["s2.md", "s3.md"], ["s4.md"]]
    assert cached.prefix.cache and len(several.groups) == 3
    # Every planned prefix appears exactly once; packing off gives one unit each.
    assert len(plan_packs(small, max_chunks=8, max_tokens=0)) == 5
    assert len(plan_packs(small, max_chunks=1, max_tokens=10_000)) == 5


def test_a_pack_marks_each_document_with_ids_running_on() -> None:
    first = _planned("one.md", ["alpha", "beta"], 10)
    second = _planned("two.md", ["gamma", "delta", "epsilon"], 10)
    ask = pack_ask([(m.prefix.window, m.chunks) for m in (first, second)], context_tokens=100)
    assert ask.ids == (("c1", "c2"), ("c3", "c4", "c5"))
    prefix = ask.request.prefix
    assert "[[c1]]alpha[[/c1]] [[c2]]beta[[/c2]]" in prefix
    assert "[[c3]]gamma[[/c3]] [[c4]]delta[[/c4]] [[c5]]epsilon[[/c5]]" in prefix
    assert prefix.count("<document>") == 2 and not ask.request.cache
    assert "Situate these 5 chunks: c1, c2, c3, c4, c5." in ask.request.instruction
    assert "Each of the 2 documents above" in ask.request.instruction
    assert ask.request.json_schema == named_schema(["c1", "c2", "c3", "c4", "c5"])


def test_a_packs_usage_is_shared_exactly_by_size() -> None:
    usage = Usage(input_tokens=1001, cache_read_tokens=7, output_tokens=333)
    shares = share_usage(usage, [500, 300, 200])
    assert sum(shares, Usage()) == usage
    # 500.5, 300.3 and 200.2: the one token left over goes to the largest remainder.
    assert [s.input_tokens for s in shares] == [501, 300, 200]
    assert shares[0].output_tokens > shares[2].output_tokens
    assert sum(share_usage(Usage(output_tokens=5), [0, 0]), Usage()).output_tokens == 5


def _small_corpus(root: Path, count: int = 6) -> Path:
    root.mkdir()
    for i in range(count):
        facts = " ".join(f"Fact {j} of note {i} holds at {i * 13 + j}." for j in range(12))
        (root / f"note{i}.md").write_text(f"# Note {i}\n\n{facts}\n\n## More\n\n{facts}\n")
    return root


def _settings(tmp_path: Path, **extra: Any) -> Any:
    return load_settings(index_dir=tmp_path / "idx", chunk_tokens=60, context="llm",
                         llm_group_size=16, **extra)  # fmt: skip


def _messages(server: FakeLLMServer) -> list[Any]:
    return [r for r in server.requests if r.endpoint in ("messages", "chat.completions")]


_DOCS = re.compile(r"<document>")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_small_documents_share_requests_and_estimate_agrees(
    tmp_path: Path,
    fake_llm_factory: Callable[..., FakeLLMServer],
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
) -> None:
    server = fake_llm_factory()
    use_fake_llm(monkeypatch, server, provider)
    monkeypatch.setenv("CTXR_CLAUDE_TOKENIZER", "cl100k")  # as the fake server counts
    corpus = _small_corpus(tmp_path / "corpus")
    settings = _settings(tmp_path)
    estimate = estimate_paths([corpus], settings, embedder=HashEmbedder()).models[0]
    unpacked = _settings(tmp_path, llm_pack_tokens=0)
    alone = estimate_paths([corpus], unpacked, embedder=HashEmbedder()).models[0]
    assert alone.requests == 6 and alone.usage.input_tokens > estimate.usage.input_tokens
    report = build_index([corpus], settings, embedder=HashEmbedder())
    summary = report.contexts
    assert summary is not None and summary.failures == 0 and summary.retries == 0
    sent = _messages(server)
    packed = [r for r in sent if len(_DOCS.findall(json.dumps(r.body))) > 1]
    assert packed and len(sent) < 6  # six documents, fewer requests
    assert sum(len(asked_ids(r.body)) for r in sent) == report.chunks_written
    assert estimate.requests == summary.requests == len(sent)
    assert estimate.usage.input_tokens == pytest.approx(summary.input_tokens, rel=0.02)
    # The documents' shares add up to the bill, in the estimate as in the run's ledger.
    shared = sum((d.usage for d in estimate.documents), Usage())
    assert shared == estimate.usage


def test_a_packed_answer_missing_an_id_asks_that_chunk_alone(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    def respond(body: Any) -> str:
        answer = default_respond(body)
        asked = asked_ids(body)
        if len(asked) < 4:
            return answer
        named = json.loads(answer)
        named.pop(asked[3])  # an id of the second document, most likely
        return json.dumps(dict(reversed(named.items())))  # and out of order

    server = fake_llm_factory(respond=respond)
    use_fake_llm(monkeypatch, server, "anthropic")
    report = build_index([_small_corpus(tmp_path / "corpus", 4)], _settings(tmp_path),
                         embedder=HashEmbedder())  # fmt: skip
    summary = report.contexts
    assert summary is not None and summary.failures == 0 and summary.flagged == 0
    sent = _messages(server)
    packs = [r for r in sent if len(asked_ids(r.body)) >= 4]
    alone = [r for r in sent if not asked_ids(r.body)]
    assert packs and summary.retries == len(packs) == len(alone)
    # Run again: every answer is in the response cache, nothing is sent.
    server.reset()
    again = build_index([tmp_path / "corpus"], _settings(tmp_path), embedder=HashEmbedder())
    assert again.contexts is None or again.contexts.requests == 0
    assert _messages(server) == []
