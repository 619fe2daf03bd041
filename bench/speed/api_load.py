"""Load on the HTTP API: `ctxr serve` on loopback, driven by concurrent clients for a bounded time.

The examples corpus is indexed with the real local MiniLM (or `--index DIR` names an existing
index), `ctxr serve` is started as a subprocess on a free loopback port, exactly as a user runs
it (access log on, written to a file), and for each mode (and each `--clients` level) that many
clients, all in one process on one `httpx.AsyncClient`, send `POST /search` one after another
for `--seconds`, cycling through the 30 queries of the judged set. Printed per row: requests,
requests/s, p50/p95/p99 latency as the client sees it (connection reuse on), errors (any
answer but 200, a transport failure, or a reranked mode whose hits carry no rerank score), and
flagged: answers with any hit flagged (a reranker that failed and fell back to the fused
order). The script exits 1 if there was any error or any flagged answer.

A mode ``MODE+RERANKER`` (``hybrid+http``, ``hybrid+llm``) sends ``"rerank": RERANKER``. The
reranking backend is the test suite's fake server (`tests/fakes/llm_server.py`, imported with
``tests/`` put on sys.path), started in this process on loopback, and ``ctxr serve`` is pointed
at it (``CTXR_RERANK_URL=<fake>/v1/rerank``, ``CTXR_RERANK_MODEL``, ``CTXR_RERANK_API_KEY``; for the
llm reranker ``CTXR_LLM_PROVIDER=anthropic`` and ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY``).
Latency model:

- ``http`` (Cohere-shaped ``POST /v1/rerank``): uniform in ``--rerank-latency-ms`` (default
  30-80 ms, seeded), a hosted rerank API's round trip for 50 short passages; scores are the
  fake's deterministic word overlap.
- ``llm`` (Anthropic Messages): the fake's `realistic_latency` times ``--llm-latency-scale``
  (0.3 s + 20 us per prompt token + 8 ms per output token, ~5.3 s for 50 candidates: the JSON
  list of 50 scores is ~600 output tokens); the answer scores every passage 0-10 by the same
  word overlap.

Usage::

    python -m bench.speed.api_load [--seconds 10] [--clients 1,8,32]
        [--modes hybrid,hybrid+http,hybrid+llm,dense,bm25] [--k 10] [--index DIR]
        [--rerank-latency-ms 30,80] [--llm-latency-scale 1.0]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common.checkout import CTXR, REPO, TESTS, child_env
from bench.common.measure import Span, Timing, load_line, machine, say
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.pipeline.build import build_index

sys.path.insert(0, str(TESTS))  # the fake reranking backend: `fakes.llm_server`
JUDGED = TESTS / "data" / "judged" / "queries.jsonl"
RERANK_KEY = "bench-rerank-key"
RERANK_MODEL = "rerank-v3.5"
_PASSAGE = re.compile(r'<passage id="(\d+)">\n(.*?)\n</passage>', re.DOTALL)
_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)


@dataclass
class Row:
    mode: str
    rerank: str | None
    clients: int
    latencies: list[float] = field(default_factory=list)  # seconds, answers that count
    errors: dict[str, int] = field(default_factory=dict)  # by status or exception
    flagged: int = 0  # 200 answers with any hit flagged (a reranker fell back)
    seconds: float = 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _queries() -> list[str]:
    lines = JUDGED.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def _llm_scores(body: Mapping[str, Any]) -> str:
    """The fake model's answer to a rerank prompt: every passage scored 0-10 by word overlap."""
    from fakes.llm_rerank import relevance

    content = body["messages"][0]["content"]
    prompt = content if isinstance(content, str) else "".join(b["text"] for b in content)
    found = _QUERY.search(prompt)
    query = found.group(1) if found else ""
    return json.dumps(
        [
            {"id": int(n), "score": round(10 * relevance(query, text))}
            for n, text in _PASSAGE.findall(prompt)
        ]
    )


@contextlib.contextmanager
def _rerank_backend(http_ms: tuple[float, float], llm_scale: float) -> Iterator[Any]:
    """The fake server on loopback: /v1/rerank at `http_ms`, Messages at realistic latency."""
    from fakes.llm_faults import Tokens, realistic_latency
    from fakes.llm_server import FakeLLMServer

    rng = random.Random(0)
    chat = realistic_latency(scale=llm_scale)

    def latency(tokens: Tokens) -> float:
        if tokens.output == 0 and tokens.uncached == 0:  # a rerank call (no tokens counted)
            return rng.uniform(*http_ms) / 1000
        return chat(tokens)

    with FakeLLMServer(
        latency=latency, respond=_llm_scores, keep_bodies=False, api_key=RERANK_KEY
    ) as fake:
        yield fake


def _start_server(
    index_dir: Path, cache_dir: Path, port: int, log: Path, extra_env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    dirs = {"CTXR_INDEX_DIR": str(index_dir), "CTXR_CACHE_DIR": str(cache_dir)}
    env = child_env({**dirs, **extra_env})
    command = [*CTXR, "serve", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=sink)
    waited = Span()
    while waited.seconds < 60:
        if server.poll() is not None:
            raise SystemExit(f"ctxr serve exited with {server.returncode}; see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.terminate()
    raise SystemExit(f"ctxr serve did not become healthy in 60 s; see {log}")


def _check(payload: Any, rerank: str | None) -> str | None:
    """The verdict on a 200 answer: "flagged" if any hit carries a flag, "not reranked" if a
    reranked answer's hits lack a rerank score, else None."""
    hits = payload["hits"]
    if any(h.get("flags") for h in hits):
        return "flagged"
    if rerank is not None and not all("rerank" in h["scores"] for h in hits):
        return "not reranked"
    return None


async def _drive(url: str, mode: str, clients: int, seconds: float, k: int) -> Row:
    search_mode, _, rerank = mode.partition("+")
    row = Row(search_mode, rerank or None, clients)
    queries = _queries()
    extra = {"rerank": rerank} if rerank else {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        warm = [{"query": q, "k": k, "mode": search_mode, **extra} for q in queries[:4]]
        await asyncio.gather(*(http.post("/search", json=b) for b in warm[: min(clients, 4)]))
        drive = Span()

        async def client(n: int) -> None:
            i = n
            while drive.seconds < seconds:
                body = {"query": queries[i % len(queries)], "k": k, "mode": search_mode, **extra}
                i += clients
                one = Span()
                verdict = None
                try:
                    response = await http.post("/search", json=body)
                    payload = response.json()  # the whole body arrived and parses
                    status = str(response.status_code)
                    if status == "200":
                        verdict = _check(payload, row.rerank)
                except (httpx.HTTPError, ValueError) as exc:
                    status = type(exc).__name__
                if status == "200" and verdict != "not reranked":
                    row.latencies.append(one.seconds)
                    row.flagged += verdict == "flagged"
                else:
                    status = verdict or status
                    row.errors[status] = row.errors.get(status, 0) + 1

        with Span() as span:
            await asyncio.gather(*(client(n) for n in range(clients)))
        row.seconds = span.seconds
    return row


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="per row")
    parser.add_argument("--clients", default="1,8,32", help="comma-separated concurrency levels")
    parser.add_argument("--modes", default="hybrid,hybrid+http,hybrid+llm,dense,bm25")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--index", type=Path, help="an existing index (default: index examples/)")
    parser.add_argument(
        "--rerank-latency-ms", default="30,80", help="the fake /v1/rerank's latency range, ms"
    )
    parser.add_argument(
        "--llm-latency-scale", type=float, default=1.0, help="scales the fake's chat latency"
    )
    args = parser.parse_args(argv)
    say(load_line("at start"))
    modes = args.modes.split(",")
    low, high = (float(x) for x in args.rerank_latency_ms.split(","))
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxr-api-load-"))
        work = Path(tmp)
        index_dir, cache_dir = args.index or work / "index", work / "cache"
        if args.index is None:
            os.chdir(REPO)
            settings = load_settings(index_dir=index_dir, cache_dir=cache_dir)
            report = build_index(["examples"], settings)
            print(f"indexed examples/: {report.points_total} chunks", file=sys.stderr)
        fake, extra_env = None, {}
        if any("+" in m for m in modes):
            fake = stack.enter_context(_rerank_backend((low, high), args.llm_latency_scale))
            extra_env = {
                "CTXR_RERANK_URL": f"{fake.base_url}/v1/rerank",
                "CTXR_RERANK_MODEL": RERANK_MODEL,
                "CTXR_RERANK_API_KEY": RERANK_KEY,
                "CTXR_LLM_PROVIDER": "anthropic",
                "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
                "ANTHROPIC_API_KEY": RERANK_KEY,
            }
        port = _free_port()
        server = _start_server(index_dir, cache_dir, port, work / "server.log", extra_env)
        try:
            rows = [
                asyncio.run(_drive(f"http://127.0.0.1:{port}", mode, int(c), args.seconds, args.k))
                for mode in modes
                for c in args.clients.split(",")
            ]
        finally:
            server.terminate()
            server.wait(timeout=30)
        access_lines = sum(1 for _ in (work / "server.log").open(encoding="utf-8", errors="replace")
                           if _.startswith('{"method"'))  # fmt: skip
        backend = (
            Counter(f"{r.endpoint} {r.status}" for r in fake.requests) if fake is not None else {}
        )
    say(f"{machine()}; {args.seconds:g} s per row, k = {args.k}; {access_lines} access-log lines")
    if fake is not None:
        print(f"rerank backend (fake, loopback): http {low:g}-{high:g} ms uniform, llm "
              f"realistic_latency x {args.llm_latency_scale:g}; requests by endpoint and "
              f"status: {dict(sorted(backend.items()))}")  # fmt: skip
    print(
        "| mode | rerank | clients | requests | requests/s | p50 ms | p95 ms | p99 ms | mean ms "
        "| errors | flagged |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = Timing.of(r.latencies)
        print(f"| {r.mode} | {r.rerank or 'none'} | {r.clients} | {t.count} | "
              f"{t.count / r.seconds:.1f} | {t.p50:.1f} | {t.p95:.1f} | {t.p99:.1f} | "
              f"{t.mean:.1f} | {sum(r.errors.values())} | {r.flagged} |")  # fmt: skip
    say(load_line("at end"))
    bad = [
        (r.mode, r.rerank, r.clients, r.errors, r.flagged) for r in rows if r.errors or r.flagged
    ]
    if bad:
        raise SystemExit(f"errors or flagged answers: {bad}")


if __name__ == "__main__":
    main()
