"""What `ctxr serve`'s app adds to a search, measured in process: no socket, no client.

Over an index kept by ``python -m bench.speed.scale --keep DIR``, the app `ctxr serve` runs
(`ctxr.api.app.create_app`) is called as an ASGI server calls it, with one search request
(the scale benchmark's query words, k = 10) asked again and again; each answer's
`Server-Timing` says how long the search itself took, and the rest of the call is the app's:
the request's validation, the access guard, the hop to the worker thread that searches, and
the answer's serialisation. Rows, interleaved request by request:

- ``app``: the app as served;
- ``app without the guard``: the same app with its `Guard` middleware left out (token, Host,
  body limits and the access log), to show what the guard costs.

Then the serialisation of one 10-hit answer on its own: pydantic's `model_dump` to a dict
and `json.dumps` of it (what `JSONResponse` does), against pydantic's `model_dump_json`
(`ctxr.retrieve.hits.result_bytes`, what the app does). Printed: p50 / p90 in ms per row and
the load average. Uvicorn, HTTP parsing and the client are not in these figures;
``bench.speed.scale`` measures the whole round trip.

Usage::

    python -m bench.speed.scale --chunks 200000 --keep /tmp/scale200k   # once
    python -m bench.speed.serve_overhead --keep /tmp/scale200k [--requests 500]
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.measure import Timing, load_line, machine, parser, say
from ctxr.api.app import create_app
from ctxr.config import load_settings
from ctxr.retrieve.hits import Asked, hits_result, result_bytes, result_json
from ctxr.retrieve.service import SearchService

QUERY = "lantern harbour tide"
K = 10


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    index = Path(args.keep) / "index"
    say(f"serve overhead: index {index}; {machine()}")
    say(load_line("at start"))
    settings = load_settings(index_dir=index)
    apps = {"app": create_app(settings), "app without the guard": create_app(settings)}
    bare = apps["app without the guard"]
    bare.user_middleware = [m for m in bare.user_middleware if m.cls.__name__ != "Guard"]
    spans = asyncio.run(_requests(apps, args.requests))
    say(f"{args.requests} requests a row, k = {K}: the call's time less the search's own")
    say("")
    say("| row | p50 ms | p90 ms |")
    say("|---|---:|---:|")
    for name, seconds in spans.items():
        t = Timing.of(seconds)
        say(f"| {name} | {t.p50:.3f} | {t.p90:.3f} |")
    say("")
    _serialisation(settings, args.requests)
    say(load_line("at end"))
    return 0


async def _requests(apps: dict[str, Any], count: int) -> dict[str, list[float]]:
    body = json.dumps({"query": QUERY, "k": K}).encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/search", "raw_path": b"/search", "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip

    async def call(app: Any) -> float:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        started = time.perf_counter()
        await app(dict(scope), receive, send)
        spent = time.perf_counter() - started
        if sent[0]["status"] != 200:
            raise SystemExit(f"the app answered {sent[0]['status']}: {sent}")
        timing = dict(sent[0]["headers"])[b"server-timing"].decode()
        return spent - float(timing.split("dur=")[1]) / 1000

    contexts = [app.router.lifespan_context(app) for app in apps.values()]
    for context in contexts:
        await context.__aenter__()
    try:
        for _ in range(50):  # warm: the index's pages, the query's vector cached
            for app in apps.values():
                await call(app)
        spans: dict[str, list[float]] = {name: [] for name in apps}
        for _ in range(count):
            for name, app in apps.items():
                spans[name].append(await call(app))
        return spans
    finally:
        for context in reversed(contexts):
            await context.__aexit__(None, None, None)


def _serialisation(settings: Any, count: int) -> None:
    with SearchService(settings) as service:
        hits = service.search(QUERY, k=K)
    answer = hits_result(QUERY, hits, Asked("hybrid", "dbsf", K, False, False))
    ways = {
        "model_dump + json.dumps (JSONResponse)": lambda: json.dumps(
            result_json(answer), ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8"),
        "model_dump_json (result_bytes)": lambda: result_bytes(answer),
    }
    first, second = (way() for way in ways.values())
    if json.loads(first) != json.loads(second):
        raise SystemExit("the two serialisations give different JSON")
    spans: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(count * 4):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            spans[name].append(time.perf_counter() - started)
    say(f"one answer of {len(hits)} hits, {len(first):,} bytes of JSON")
    say("")
    say("| serialisation | p50 µs | p90 µs |")
    say("|---|---:|---:|")
    for name, seconds in spans.items():
        t = Timing.of(seconds)
        say(f"| {name} | {t.p50 * 1000:.0f} | {t.p90 * 1000:.0f} |")
    say("")


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--keep", required=True, help="a kept scale run (its index)")
    p.add_argument("--requests", type=int, default=500)
    return p


if __name__ == "__main__":
    raise SystemExit(main())
