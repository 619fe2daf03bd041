"""The usage ledger: totals, per-document accounts, dollars, JSON written atomically."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from ctxr.enrich.situate.ledger import Ledger, cache_read_share, ledger_path
from ctxr.llm.base import Usage


def test_totals_and_per_document_accounts(tmp_path: Path) -> None:
    ticks = iter([10.0, 12.5])
    ledger = Ledger(
        tmp_path / "l.json", cost=lambda u: u.input_tokens / 1000, clock=lambda: next(ticks)
    )
    ledger.begin("anthropic", "claude-haiku-4-5", "p1")
    ledger.add_prefix("a", "docs/a.md", chunks=3, tokens=5000, cached=True)
    ledger.add_prefix("b", "docs/b.md", chunks=1, tokens=200, cached=False)
    for usage in (Usage(100, 5000, 0, 50), Usage(100, 0, 5000, 50), Usage(100, 0, 5000, 50)):
        ledger.record_request("a")
        ledger.record_usage("a", usage)
    ledger.record_request("b")
    ledger.record_usage("b", Usage(300, 0, 0, 40))
    ledger.record_retry("c1", "529 overloaded")
    ledger.record_failure("c2", "400 bad")
    ledger.record_flag("c3", "empty response")
    ledger.record_response_cache_hit("a")
    ledger.finish()

    summary = ledger.summary()
    assert summary.requests == 4 and summary.retries == 1 and summary.failures == 1
    assert summary.cache_writes == 1 and summary.prefixes == 2
    assert summary.uncached_documents == 1 and summary.response_cache_hits == 1
    assert summary.input_tokens == 600 and summary.cache_read_tokens == 10000
    assert summary.dollars == 0.6 and summary.wall_seconds == 2.5
    assert summary.cache_read_share == round(10000 / 15600, 4)
    a = ledger.documents["a"].to_json()
    assert a["cache_writes"] == 1 and a["cache_write_tokens"] == 5000 and a["cached"] is True
    assert ledger.documents["b"].to_json()["cached"] is False

    written = ledger.write()
    assert written == tmp_path / "l.json"
    data = json.loads(written.read_text())
    assert data["failures"] == [{"chunk_id": "c2", "error": "400 bad"}]
    assert data["flagged"] == [{"chunk_id": "c3", "reason": "empty response"}]
    assert data["documents"]["a"]["cache_read_tokens"] == 10000
    assert not list(tmp_path.glob("*.tmp"))


def test_no_cost_function_means_no_dollars_and_no_path_means_no_file() -> None:
    ledger = Ledger()
    ledger.begin("openai", "gpt-4o-mini", "p1")
    assert ledger.summary().dollars is None
    assert ledger.write() is None
    assert cache_read_share(Usage()) == 0.0


def test_progress_line_mentions_dollars_when_priced() -> None:
    ledger = Ledger(cost=lambda u: 0.25)
    ledger.record_usage("a", Usage(0, 100, 300, 0))
    line = ledger.progress_line(1, 2, 7)
    assert line.startswith("contexts: 1/2 documents, 7 chunks")
    assert "cache reads 75%" in line and "$0.2500" in line


def test_ledger_path_is_under_the_index_dir(tmp_path: Path) -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (
        ledger_path(tmp_path, when) == tmp_path / "ledgers" / "contexts-20260102T030405000000Z.json"
    )
