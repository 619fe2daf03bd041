"""Load on the HTTP API: `ctxr serve` on loopback, driven by concurrent clients for a bounded time.

The examples corpus is indexed with the real local MiniLM (or `--index DIR` names an existing
index), `ctxr serve` is started as a subprocess on a free loopback port, exactly as a user runs
it (access log on, written to a file), and for each mode (and each `--clients` level) that many
clients, all in one process on one `httpx.AsyncClient`, send `POST /search` one after another
for `--seconds`, cycling through the 30 queries of the judged set. Printed per row: requests,
requests/s, p50/p95/p99 latency as the client sees it (connection reuse on), and errors: any
answer but 200, or a transport failure. The script exits 1 if there was any error.

Reranking is not part of the API yet, so there is no "with reranking" row.

Usage::

    python bench/api_load.py [--seconds 10] [--clients 1,8,32] [--modes hybrid,dense,bm25]
        [--k 10] [--index DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

# Runnable as `python bench/api_load.py` from a checkout without installing ctxr.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxr.config import load_settings
from ctxr.index.builder import build_index

ROOT = Path(__file__).resolve().parents[1]
JUDGED = ROOT / "tests" / "data" / "judged" / "queries.jsonl"


@dataclass
class Row:
    mode: str
    clients: int
    latencies_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)  # by status or exception
    seconds: float = 0.0

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _queries() -> list[str]:
    lines = JUDGED.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def _start_server(
    index_dir: Path, cache_dir: Path, port: int, log: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CTXR_INDEX_DIR": str(index_dir), "CTXR_CACHE_DIR": str(cache_dir)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, "-c", "from ctxr.cli import main; main()", "serve",
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with log.open("wb") as sink:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=sink)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
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


async def _drive(url: str, mode: str, clients: int, seconds: float, k: int) -> Row:
    row = Row(mode, clients)
    queries = _queries()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:
        for i in range(min(clients, 4)):  # warm the connections and the server's code paths
            await http.post("/search", json={"query": queries[i], "k": k, "mode": mode})
        stop = time.perf_counter() + seconds

        async def client(n: int) -> None:
            i = n
            while time.perf_counter() < stop:
                body = {"query": queries[i % len(queries)], "k": k, "mode": mode}
                i += clients
                started = time.perf_counter()
                try:
                    response = await http.post("/search", json=body)
                    response.json()  # the whole body arrived and parses
                    status = str(response.status_code)
                except (httpx.HTTPError, ValueError) as exc:
                    status = type(exc).__name__
                if status == "200":
                    row.latencies_ms.append((time.perf_counter() - started) * 1000)
                else:
                    row.errors[status] = row.errors.get(status, 0) + 1

        began = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(clients)))
        row.seconds = time.perf_counter() - began
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per row")
    parser.add_argument("--clients", default="1,8,32", help="comma-separated concurrency levels")
    parser.add_argument("--modes", default="hybrid,dense,bm25")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--index", type=Path, help="an existing index (default: index examples/)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxr-api-load-") as tmp:
        work = Path(tmp)
        index_dir, cache_dir = args.index or work / "index", work / "cache"
        if args.index is None:
            os.chdir(ROOT)
            settings = load_settings(index_dir=index_dir, cache_dir=cache_dir)
            report = build_index(["examples"], settings)
            print(f"indexed examples/: {report.points_total} chunks", file=sys.stderr)
        port = _free_port()
        server = _start_server(index_dir, cache_dir, port, work / "server.log")
        try:
            rows = [
                asyncio.run(_drive(f"http://127.0.0.1:{port}", mode, int(c), args.seconds, args.k))
                for mode in args.modes.split(",")
                for c in args.clients.split(",")
            ]
        finally:
            server.terminate()
            server.wait(timeout=30)
        access_lines = sum(1 for _ in (work / "server.log").open(encoding="utf-8", errors="replace")
                           if _.startswith('{"method"'))  # fmt: skip
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}; "
          f"{args.seconds:g} s per row, k = {args.k}; {access_lines} access-log lines")  # fmt: skip
    print(
        "| mode | clients | requests | requests/s | p50 ms | p95 ms | p99 ms | mean ms | errors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        n = len(r.latencies_ms)
        mean = statistics.fmean(r.latencies_ms) if n else float("nan")
        p50, p95, p99 = (r.quantile(q) for q in (0.5, 0.95, 0.99))
        print(f"| {r.mode} | {r.clients} | {n} | {n / r.seconds:.0f} | {p50:.1f} | {p95:.1f} | "
              f"{p99:.1f} | {mean:.1f} | {sum(r.errors.values())} |")  # fmt: skip
    if any(r.errors for r in rows):
        raise SystemExit(f"errors: {[(r.mode, r.clients, r.errors) for r in rows if r.errors]}")


if __name__ == "__main__":
    main()
