"""Scale: ctxr end to end over N chunks of Markdown: build, open, search under load, update.

One run measures, over one corpus of `--chunks` chunks (default 1,000,000):

1. Build. About ``N / 10`` synthetic Markdown files (`bench.common.markdown_corpus`: a title and
   10 sections of 30-85 Zipf words from `bench.common.synthetic`'s vocabulary, so BM25 is real
   BM25 over realistic term statistics; ctxr's splitter gives about 10 chunks a file) are
   written under ``corpus/`` in 10 folders, and indexed by ctxr's own pipeline,
   ``build_index(["corpus"], settings, embedder=E)`` in a child process of its own: the walk,
   the loaders, the Markdown splitter, outline contexts (the default without an LLM key), BM25,
   the embedding cache, the writes, the manifest, the HNSW build and the read-back check are
   all ctxr's and all timed. Only the embedding is not: ``E`` is the embedding cache
   (``components.with_cache``, as ``ctxr index`` wraps its embedder) around a
   `bench.common.pool_embedder.PoolEmbedder`, which answers as the local MiniLM does (name,
   dimension, input limit, its real tokenizer's counts) with vectors from a pool of ``--pool``
   real MiniLM embeddings of real texts (this repository's docs), chosen by each text's hash,
   plus noise, renormalised. The dense vectors are therefore SYNTHETIC (clusters around real
   embeddings); the manifest records the default embedder, honestly as far as the vector space
   goes, so ``ctxr serve`` opens the index with the default embedder and embeds queries with
   the real model. Printed: the run's seconds and its stages (`IndexReport`), the HNSW build's
   share (``optimize``), chunks per second, disk bytes per chunk (``du`` of the index directory
   over its points; the embedding cache lives inside it and is shown apart), and the build's
   peak RSS (``VmHWM`` of the child that built, `bench.common.measure.run_child`; it holds the
   tokenizer but never loads the ONNX model, which a real run holds while it embeds: about
   250 MiB more, see docs/explanation/benchmarks.md).
2. Open. ``ctxr serve`` as a user starts it (a child process, a free loopback port, access log
   on, to a file): seconds from its start to the first answered ``POST /search``, which
   includes loading the model and embedding that first query.
3. Hybrid search through ``ctxr serve`` over HTTP, excluding the query embedding: ``--queries``
   queries (2-6 words drawn from the corpus's law, the 30 commonest words left out, as users
   type) are each searched once, untimed, unfiltered and filtered; the server's query vector
   cache (``CTXR_QUERY_CACHE_SIZE``, 4096) then holds every one of them, so the timed searches
   embed nothing. Then for each of ``--clients`` (1 and 8) and each filter (none, and
   ``source`` under one of the 10 folders, a tenth of the chunks), ``--requests`` searches
   (k = 10, hybrid) cycling through the queries, that many clients at once on one
   ``httpx.AsyncClient``. Printed per row: requests/s, p50/p95/p99 as the client sees them, and
   the same of the server's own time for the search (the ``Server-Timing`` header).
4. The server's peak RSS after that load (``VmHWM`` of the serve process, read from
   ``/proc/PID/status`` before it is stopped).
5. An update: one section of 1% of the files (``--update-share``) is rewritten, and the same
   ``build_index`` runs again over the same path in a new child, as a user's ``ctxr index``
   rerun does (walk, pass over the files whose stamps are as indexed, redo the changed
   documents, embedding cache for the unchanged chunks); its seconds, also as a share of the
   full build's (the goal: 2% or less). With ``--update-hashing``, then a second update of 1%
   of other files that reads and hashes every file (``CTXR_TRUST_FILE_STAMPS=false``, as runs
   did before stamps), to set the two side by side.
6. The load average at start and end.

The environment's ``CTXR_*``, ``ANTHROPIC_*`` and ``OPENAI_*`` variables are dropped, for this
process and its children: the defaults are measured, and no key turns contexts into paid calls.
``--keep DIR`` keeps the corpus, the pool and the index in DIR; run again with the same DIR,
the benchmark reuses them (no corpus, no build: the build's figures are the run's that built
it) and measures the rest, each update editing other files.

Usage::

    python -m bench.speed.scale [--chunks 1000000] [--queries 200] [--requests 400]
        [--clients 1,8] [--pool 256] [--update-share 0.01] [--seed 7] [--keep DIR]
        [--quantization int8|none] [--no-update] [--update-hashing]
        [--serve-env CTXR_RESCORE=false] [--serve-memory-cap MIB] [--cold]

What a server needs, beside what it holds: ``--cold`` drops the index's cached pages before
``ctxr serve`` starts (every page it reads is then its own), and ``--serve-memory-cap MIB``
runs it in a memory cgroup of that limit (`bench.common.memory_cap`), so its searches show
whether it fits; the cgroup's peak, page cache included, is printed beside ``VmHWM``.
``--serve-env NAME=VALUE`` gives the server a setting (``CTXR_RESCORE=false``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import httpx

from bench.common import markdown_corpus
from bench.common.checkout import CTXR, child_env, forget_settings
from bench.common.measure import (
    Span,
    Timing,
    disk_bytes,
    drop_cached_pages,
    load_line,
    machine,
    peak_mib_of,
    say,
    status_mib,
)
from bench.common.measure import parser as cli
from bench.common.memory_cap import MemoryCap
from bench.common.pool_build import CORPUS, INDEX, POOL, STATE, run_build
from bench.common.pool_embedder import embed_pool
from bench.common.synthetic import make_queries
from ctxr.config import Quantization, StoreSettings
from ctxr.index.embed.onnx import OnnxEmbedder

FILTER_PART = 3
K = 10
START_SECONDS = 600.0  # opening a large index on a loaded machine
STOP_SECONDS = 900.0  # a clean close seals the shard: sizes and checksums of its files
_SERVER_TIMING = re.compile(r"search;dur=([0-9.]+)")


@dataclass
class Row:
    clients: int
    filtered: bool
    latencies: list[float] = field(default_factory=list)  # client seconds of 200 answers
    server_ms: list[float] = field(default_factory=list)  # Server-Timing of the same
    errors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def _stages(report: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in report["stage_seconds"].items())


def _serve(
    work: Path, port: int, env: dict[str, str], cap: MemoryCap | None
) -> subprocess.Popen[bytes]:
    command = [*CTXR, "serve", "--index", INDEX, "--host", "127.0.0.1", "--port", str(port)]
    with (work / "serve.log").open("wb") as log:
        return subprocess.Popen(
            command,
            cwd=work,
            env=child_env(env),
            stdout=log,
            stderr=log,
            preexec_fn=cap.enter if cap is not None else None,
        )


def _first_answer(server: subprocess.Popen[bytes], url: str, query: str, work: Path) -> None:
    """Wait for the first 200 answer to a search: the server is up and the index open."""
    waited = Span()
    while waited.seconds < START_SECONDS:
        if server.poll() is not None:
            raise SystemExit(f"ctxr serve exited with {server.returncode}; see {work}/serve.log")
        try:
            if httpx.post(f"{url}/search", json={"query": query, "k": K}, timeout=60).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.02)
    raise SystemExit(f"ctxr serve answered no search in {START_SECONDS:.0f} s; see serve.log")


def _filters(filtered: bool) -> dict[str, Any]:
    if not filtered:
        return {}
    return {"filters": {"source": f"{CORPUS}/part{FILTER_PART}/"}}


def _verdict(response: httpx.Response, filtered: bool) -> str | None:
    """None for a good answer, else why not: its status, or a hit the filter should not pass."""
    if response.status_code != 200:
        return str(response.status_code)
    hits = response.json()["hits"]
    if not hits:
        return "no hits"
    prefix = f"{CORPUS}/part{FILTER_PART}/"
    if filtered and not all(h["source"].startswith(prefix) for h in hits):
        return "outside the filter"
    return None


async def _warm(url: str, queries: Sequence[str]) -> None:
    """Every query once, unfiltered and filtered: its vector is then in the server's cache."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        for query in queries:
            for filtered in (False, True):
                body = {"query": query, "k": K, **_filters(filtered)}
                bad = _verdict(await http.post("/search", json=body), filtered)
                if bad:
                    raise SystemExit(f"warm-up search {body} answered: {bad}")


async def _drive(url: str, queries: Sequence[str], row: Row, requests: int) -> None:
    limits = httpx.Limits(max_connections=row.clients, max_keepalive_connections=row.clients)
    numbers = itertools.count()
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:

        async def client() -> None:
            while (n := next(numbers)) < requests:
                body = {"query": queries[n % len(queries)], "k": K, **_filters(row.filtered)}
                one = Span()
                try:
                    response = await http.post("/search", json=body)
                    bad = _verdict(response, row.filtered)  # the whole body read and parsed
                except (httpx.HTTPError, ValueError) as exc:
                    bad = type(exc).__name__
                if bad:
                    row.errors[bad] = row.errors.get(bad, 0) + 1
                    continue
                row.latencies.append(one.seconds)
                timing = _SERVER_TIMING.search(response.headers.get("server-timing", ""))
                if timing:
                    row.server_ms.append(float(timing.group(1)))

        with Span() as span:
            await asyncio.gather(*(client() for _ in range(row.clients)))
        row.seconds = span.seconds


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _prepare(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], bool]:
    """The run's state: a kept one (reused: True) or a new one for an empty work dir."""
    state_path = work / STATE
    if state_path.exists():
        state: dict[str, Any] = json.loads(state_path.read_text())
        if (state["chunks"], state["seed"], state["pool"]) != (args.chunks, args.seed, args.pool):
            raise SystemExit(
                f"{work} holds a run of --chunks {state['chunks']} --seed {state['seed']} "
                f"--pool {state['pool']}; pass those, or a new --keep DIR"
            )
        return state, "build" in state
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"{work} is not empty and holds no run of this benchmark; pass a new DIR")
    work.mkdir(parents=True, exist_ok=True)
    return {"chunks": args.chunks, "seed": args.seed, "pool": args.pool, "rounds": 0}, False


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli(__doc__)
    parser.add_argument("--chunks", type=int, default=1_000_000, help="chunks (about)")
    parser.add_argument("--queries", type=int, default=200, help="distinct queries, all warmed")
    parser.add_argument("--requests", type=int, default=400, help="timed searches per row")
    parser.add_argument("--clients", default="1,8", help="comma-separated concurrency levels")
    parser.add_argument("--pool", type=int, default=256, help="real MiniLM vectors in the pool")
    parser.add_argument("--update-share", type=float, default=0.01, help="files edited")
    parser.add_argument(
        "--no-update", action="store_true", help="search a kept index only: edit no file"
    )
    parser.add_argument(
        "--update-hashing",
        action="store_true",
        help="then a second update that reads and hashes every file (no stamps), to compare",
    )
    parser.add_argument(
        "--serve-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for `ctxr serve` only, e.g. CTXR_RESCORE=false (repeatable)",
    )
    parser.add_argument(
        "--serve-memory-cap",
        type=int,
        metavar="MIB",
        help="run `ctxr serve` in a memory cgroup of this limit (bench.common.memory_cap)",
    )
    parser.add_argument(
        "--cold", action="store_true", help="drop the index's cached pages before `ctxr serve`"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="keep corpus and index here (reused if there)")
    parser.add_argument(
        "--quantization",
        choices=get_args(Quantization),
        default=StoreSettings.model_fields["quantization"].default,
        help="how a new index holds its dense vectors (CTXR_QUANTIZATION; default: ctxr's)",
    )
    args = parser.parse_args(argv)
    if any("=" not in pair for pair in args.serve_env):
        parser.error("--serve-env takes NAME=VALUE")
    clients = [int(c) for c in args.clients.split(",")]
    if args.chunks < markdown_corpus.SECTIONS or min(clients) < 1 or args.requests < 1:
        parser.error("need --chunks >= 10, --clients >= 1 and --requests >= 1")
    if not 1 <= args.queries <= 4096 or not 0 < args.update_share <= 1:
        parser.error("need 1 <= --queries <= 4096 (the query cache) and 0 < --update-share <= 1")
    forget_settings()
    work = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="ctxr-scale-"))
    try:
        return run(args, work, clients)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path, clients: list[int]) -> int:
    state, reused = _prepare(args, work)
    say(f"ctxr at scale: {args.chunks:,} chunks; {machine()}; work dir {work}")
    say(load_line("at start"))
    corpus = markdown_corpus.corpus(work / CORPUS, args.chunks, args.seed)
    if reused:
        build = state["build"]
        say(f"reusing the corpus and index in {work} (build figures from the run that built it)")
    else:
        with Span() as span:
            written = markdown_corpus.write(corpus)
        say(f"wrote {corpus.files:,} files, {written / 2**20:,.0f} MiB, in {span.seconds:.1f} s")
        model = OnnxEmbedder()  # the default embedder, as `ctxr serve` makes it
        with Span() as span:
            embed_pool(model, args.pool, work / POOL)
        model.close()
        say(f"pool of {args.pool} real MiniLM vectors in {span.seconds:.1f} s")
        build = run_build(work, args.seed, args.quantization)
        build["quantization"] = args.quantization
        state["build"] = build
        (work / STATE).write_text(json.dumps(state))
        say(
            f"built in {build['seconds']:.1f} s ({_stages(build)}), "
            f"{build['chunks_written']:,} chunks, peak RSS {build['peak_mib']:,.0f} MiB"
        )
    index_dir = work / INDEX
    index_bytes, cache_bytes = disk_bytes(index_dir), disk_bytes(index_dir / "cache")
    points = int(build["points_total"])

    queries = make_queries(corpus.words, args.queries, args.seed)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    serve_env = dict(pair.split("=", 1) for pair in args.serve_env)
    if args.cold:
        drop_cached_pages(index_dir)
    cap = MemoryCap.make(args.serve_memory_cap, "ctxr-serve") if args.serve_memory_cap else None
    say(
        f"ctxr serve with {serve_env or 'the defaults'}"
        f"{f', in a memory cgroup of {cap.limit_mib:,} MiB' if cap else ''}"
        f"{', the index pages dropped first' if args.cold else ''}"
    )
    with Span() as span:
        server = _serve(work, port, serve_env, cap)
        try:
            _first_answer(server, url, queries[0], work)
        except BaseException:
            server.terminate()
            if cap is not None:
                server.wait(timeout=STOP_SECONDS)
                cap.remove()
            raise
    open_s = span.seconds
    say(f"ctxr serve answered its first search {open_s:.1f} s after it started")
    rows = [Row(c, filtered) for c in clients for filtered in (False, True)]
    try:
        asyncio.run(_warm(url, queries))
        for row in rows:
            asyncio.run(_drive(url, queries, row, args.requests))
            t = Timing.of(row.latencies)
            say(
                f"  {row.clients} client(s), filter {'on' if row.filtered else 'off'}: "
                f"p50 {t.p50:.1f} ms, p99 {t.p99:.1f} ms, errors {sum(row.errors.values())}"
            )
        server_peak = peak_mib_of(server.pid)
        anon_mib, file_mib = (status_mib(f"{f}:", server.pid) for f in ("RssAnon", "RssFile"))
    finally:
        server.terminate()
        server.wait(timeout=STOP_SECONDS)
        if cap is not None:
            cap_peak, cap_events = cap.peak_mib(), cap.events()
            cap.remove()

    update: dict[str, Any] | None = None
    if not args.no_update:
        state["rounds"] += 1
        edited = markdown_corpus.edit(corpus, args.update_share, state["rounds"])
        (work / STATE).write_text(json.dumps(state))
        update = run_build(work, args.seed, args.quantization)  # taken only at creation
        seconds = update["seconds"]
        say(f"update of {len(edited):,} edited files: {seconds:.1f} s ({_stages(update)})")
    hashed: dict[str, Any] | None = None
    if not args.no_update and args.update_hashing:
        state["rounds"] += 1  # other files, edited the same way
        markdown_corpus.edit(corpus, args.update_share, state["rounds"])
        (work / STATE).write_text(json.dumps(state))
        hashed = run_build(work, args.seed, args.quantization, stamps=False)
        say(f"update reading every file: {hashed['seconds']:.1f} s ({_stages(hashed)})")

    say()
    say(
        f"## ctxr at scale: {points:,} points from {corpus.files:,} Markdown files "
        f"({build['chunks_written'] / corpus.files:.1f} chunks a file)"
    )
    say()
    say("| what | figure |")
    say("|---|---:|")
    rate = build["chunks_written"] / build["seconds"]
    say(f"| build (`IndexReport.seconds`) | {build['seconds']:,.1f} s |")
    say(f"| of it, HNSW build (`optimize`) | {build['optimize_seconds']:,.1f} s |")
    say(f"| chunks per second | {rate:,.0f} |")
    say(f"| disk per chunk (index dir) | {index_bytes / points:,.0f} B |")
    say(f"| of it, the embedding cache | {cache_bytes / points:,.0f} B |")
    say(f"| build peak RSS | {build['peak_mib']:,.0f} MiB |")
    say(f"| open: `ctxr serve` start to first answer | {open_s:.1f} s |")
    say(
        f"| server peak RSS after the load | {server_peak:,.0f} MiB (now: anonymous "
        f"{anon_mib:,.0f}, file-backed {file_mib:,.0f}) |"
    )
    if cap is not None:
        say(
            f"| the server's cgroup ({cap.limit_mib:,} MiB): peak charged, page cache included "
            f"| {cap_peak:,.0f} MiB ({cap_events}) |"
        )
    if update is not None:
        say(
            f"| update: {len(edited):,} files ({args.update_share:.0%}) edited | "
            f"{update['seconds']:.1f} s = {update['seconds'] / build['seconds']:.2%} of the build |"
        )
    if hashed is not None:
        say(
            f"| the same, every file read and hashed (no stamps) | {hashed['seconds']:.1f} s = "
            f"{hashed['seconds'] / build['seconds']:.2%} of the build |"
        )
    say()
    say(f"build stages (s): {_stages(build)}; context {build['context_kind']}")
    if update is not None:
        say(
            f"update stages (s): {_stages(update)}; {update['documents_indexed']:,} documents "
            f"redone, {update['documents_unchanged']:,} unchanged, {update['chunks_written']:,} "
            f"chunks written; peak RSS {update['peak_mib']:,.0f} MiB"
        )
        say(
            f"of the unchanged, {update.get('documents_unread', 0):,} passed over unread by "
            "their stamps"
        )
    if hashed is not None:
        say(f"update stages, every file read (s): {_stages(hashed)}")
    say()
    say(
        f"hybrid search through `ctxr serve`, k = {K}, {args.queries} queries warmed (their "
        f"vectors cached: no embedding), {args.requests} requests a row; filter: source "
        f"under {CORPUS}/part{FILTER_PART}/ (a tenth); ms"
    )
    say()
    say(
        "| clients | filter | requests/s | p50 | p95 | p99 | server p50 | server p95 | "
        "server p99 | errors |"
    )
    say("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        t, s = Timing.of(row.latencies), Timing.of([ms / 1000 for ms in row.server_ms])
        say(
            f"| {row.clients} | {'10%' if row.filtered else 'none'} | "
            f"{t.count / row.seconds:,.1f} | {t.p50:.1f} | {t.p95:.1f} | {t.p99:.1f} | "
            f"{s.p50:.1f} | {s.p95:.1f} | {s.p99:.1f} | {sum(row.errors.values())} |"
        )
    say()
    say(
        f"dense vectors: SYNTHETIC, {args.pool} real MiniLM embeddings + noise (chosen by "
        "text hash), held as "
        f"{build.get('quantization', 'the default of the commit that built them')}; "
        "queries embedded by the real model, once each, before timing"
    )
    say(load_line("at end"))
    bad = [(r.clients, r.filtered, r.errors) for r in rows if r.errors]
    if bad:
        raise SystemExit(f"searches that failed: {bad}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
