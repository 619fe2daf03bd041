"""A loopback HTTP server speaking the Anthropic Messages and OpenAI Chat Completions APIs.

The real SDKs talk to it over HTTP/1.1 (keep-alive, dozens of concurrent connections)::

    with FakeLLMServer(latency=0.05) as server:
        client = anthropic.AsyncAnthropic(base_url=server.anthropic_base_url, api_key="test")
        ...
        assert all(n == 1 for n in server.cache_writes_by_prefix().values())

Endpoints: ``POST /v1/messages``, ``POST /v1/messages/count_tokens``,
``POST /v1/chat/completions``, ``POST /v1/rerank`` (Cohere's shape, `fakes.llm_rerank`),
``POST /v1/embeddings`` (deterministic unit vectors from
`fakes.llm_wire.fake_embedding`, ``dimensions`` honoured, tokens counted with tiktoken).
Token counts follow `fakes.llm_wire` (see its docstring and `count_request_tokens`); prompt
caching follows `fakes.llm_cache` (a prefix becomes readable only when the response that wrote
it completes; per-model minimum; TTL refreshed on read).
Faults (`fakes.llm_faults`): scripted with `inject`, or random at `fault_rate`, plus a
server-side requests-per-minute limit answering 429 with a correct retry-after.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .llm_batches import FakeBatches
from .llm_cache import AnthropicPromptCache, OpenAIPrefixCache
from .llm_faults import (
    RANDOM_FAULTS,
    Admission,
    Fault,
    FaultPlan,
    Latency,
    RateLimiter,
)
from .llm_handler import handle_post
from .llm_window import ServerKind
from .llm_wire import (
    ANTHROPIC_MIN_CACHEABLE,
    Provider,
    count_request_tokens,
    default_respond,
)

__all__ = ["FakeLLMServer", "RecordedRequest", "count_request_tokens"]

# How long an answer is held for `gather` before it goes out anyway: far longer than any
# loaded machine takes to open a few dozen loopback connections.
GATHER_WAIT_S = 10.0


@dataclass(slots=True)
class RecordedRequest:
    """One request as the server saw it. Times are the server's clock (monotonic seconds)."""

    index: int
    endpoint: str  # "messages" | "count_tokens" | "chat.completions" | "embeddings" | a path
    provider: Provider
    arrival: float
    body: Any = None  # the parsed JSON body (None if it was not JSON)
    model: str | None = None
    status: int | None = None  # None: dropped, or still in flight
    fault: str | None = None  # the injected fault, or "rate_limit" for the rpm limit
    usage: dict[str, Any] | None = None  # exactly as returned
    cache_writes: list[str] = field(default_factory=list)  # prefix hashes written
    cache_read: str | None = None  # prefix hash read
    text: str | None = None
    finish: float | None = None
    batch_id: str | None = None  # run as part of a batch (`fakes.llm_batches`)
    custom_id: str | None = None


class FakeLLMServer:
    """See the module docstring.

    ``latency``: seconds per answer, or a function of its `Tokens` (see `realistic_latency`).
    ``respond``: the answer text for a request body (default: a plausible context).
    ``cache_ttl_s`` / ``cache_ttl_1h_s``: lifetimes of "5m" and "1h" cache entries.
    ``min_cacheable``: model-prefix -> minimum cacheable tokens (default: the documented table).
    ``fault_rate`` / ``fault_kinds`` / ``seed``: random faults; ``inject`` scripts them.
    ``retry_after_s`` / ``slow_s``: defaults for injected 429s and "slow" answers ("slow" and
    "drip" last ``slow_s`` unless injected with ``delay_s``).
    ``drip_interval_s``: seconds between the bytes of a "drip"; ``huge_bytes``: the length of
    a "huge" answer's text.
    ``rpm_limit`` / ``rpm_burst``: a server-side token bucket answering 429 when empty.
    ``api_key``: when set, a request without it (``x-api-key`` or a bearer token) gets a 401
    that echoes a part of the key sent, as OpenAI's does.
    ``context_window`` / ``server_kind`` / ``output_limit`` / ``window_counts_output``: a local
    server's window (`fakes.llm_window`): chat requests past it get a 400 in that server's
    words, and its info endpoint says it.
    ``gather``: answers to generation requests are held until that many requests are in flight
    at once (then never again), so a test of concurrency sees its peak whatever the machine's
    load; a held answer goes out after `GATHER_WAIT_S` anyway, and the peak then says the
    client never sent that many at once.
    ``embedding_scale``: embeddings are multiplied by it (not 1: a server that does not
    normalise). ``latency``, ``respond``, ``min_cacheable`` and ``embedding_scale`` may be
    changed between requests. A stopped
    server cannot be started again.
    """

    def __init__(
        self,
        *,
        latency: Latency = 0.0,
        respond: Callable[[Any], str] | None = None,
        cache_ttl_s: float = 300.0,
        cache_ttl_1h_s: float = 3600.0,
        min_cacheable: Mapping[str, int] | None = None,
        fault_rate: float = 0.0,
        fault_kinds: Iterable[str] = RANDOM_FAULTS,
        seed: int = 0,
        retry_after_s: float = 1.0,
        slow_s: float = 30.0,
        rpm_limit: float | None = None,
        rpm_burst: float | None = None,
        keep_bodies: bool = True,
        embedding_scale: float = 1.0,
        api_key: str | None = None,
        refuse_schemas: bool = False,
        batch_delay_s: float = 0.0,
        batch_max_requests: int = 100_000,
        batch_api: bool = True,
        drip_interval_s: float = 0.05,
        huge_bytes: int = 10_000_000,
        context_window: int | None = None,
        server_kind: ServerKind | None = None,
        output_limit: int | None = None,
        window_counts_output: bool = False,
        gather: int = 0,
    ) -> None:
        self.latency, self.keep_bodies, self.api_key = latency, keep_bodies, api_key
        # An OpenAI-compatible server without structured outputs: 400 for `response_format`.
        self.refuse_schemas = refuse_schemas
        self.embedding_scale = embedding_scale
        self.respond: Callable[[Any], str] = respond or default_respond
        self.min_cacheable = dict(
            ANTHROPIC_MIN_CACHEABLE if min_cacheable is None else min_cacheable
        )
        self.faults = FaultPlan(fault_rate, fault_kinds, seed, retry_after_s, slow_s)
        self._offset = 0.0
        self.anthropic_cache = AnthropicPromptCache(cache_ttl_s, cache_ttl_1h_s, self.clock)
        self.openai_cache = OpenAIPrefixCache(cache_ttl_s, self.clock)
        self.limiter = RateLimiter(rpm_limit, rpm_burst, self.clock) if rpm_limit else None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._connections: set[socket.socket] = set()
        self.in_flight = self.peak_in_flight = 0
        self._gathered = threading.Event()
        self.hold_until(gather)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.batches = FakeBatches(self, batch_delay_s, batch_max_requests, seed)
        self.batch_api = batch_api  # False: a server without batch endpoints (404s)
        self.drip_interval_s, self.huge_bytes = drip_interval_s, huge_bytes  # "drip", "huge"
        # A local server's window (fakes.llm_window): requests past it are refused, and the
        # server of `server_kind` says it where that server does.
        self.context_window, self.server_kind = context_window, server_kind
        self.output_limit, self.window_counts_output = output_limit, window_counts_output

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes sleeping handlers ("slow", latency)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._lock:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self, exc: type[BaseException] | None, val: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "start the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    def env(self) -> dict[str, str]:
        """Variables that point both SDKs here (for monkeypatch.setenv or a subprocess)."""
        return {
            "ANTHROPIC_BASE_URL": self.anthropic_base_url,
            "ANTHROPIC_API_KEY": "test",
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": "test",
        }

    def anthropic_client(self, **kwargs: Any) -> Any:
        import anthropic

        kwargs = {"api_key": "test", "max_retries": 0, **kwargs}
        return anthropic.AsyncAnthropic(base_url=self.anthropic_base_url, **kwargs)

    def openai_client(self, **kwargs: Any) -> Any:
        import openai

        kwargs = {"api_key": "test", "max_retries": 0, **kwargs}
        return openai.AsyncOpenAI(base_url=self.openai_base_url, **kwargs)

    # clock, faults, ledger -----------------------------------------------------------------
    def clock(self) -> float:
        return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the server's clock forward (expires caches, refills the rate limit)."""
        self._offset += seconds

    def inject(
        self,
        fault: str,
        times: int = 1,
        *,
        retry_after_s: float | None = None,
        delay_s: float | None = None,
    ) -> None:
        """The next ``times`` generation or embedding requests get ``fault`` (FIFO)."""
        with self._lock:
            self.faults.inject(fault, times, retry_after_s=retry_after_s, delay_s=delay_s)

    def inject_batch(self, kind: str, times: int = 1) -> None:
        """The next ``times`` batch requests run end as ``kind`` (errored, invalid, expired,
        canceled); FIFO."""
        with self._lock:
            self.batches.inject(kind, times)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def count(self, endpoint: str | None = None, status: int | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if (endpoint is None or r.endpoint == endpoint)
            and (status is None or r.status == status)
        )

    def cache_writes_by_prefix(self) -> dict[str, int]:
        """How many times each distinct prefix was WRITTEN (Anthropic), by prefix hash."""
        return dict(Counter(h for r in self.requests for h in r.cache_writes))

    def reset(self) -> None:
        """Forget the ledger, both caches, pending faults and the rate-limit state."""
        with self._lock:
            self._requests.clear()
            self.anthropic_cache.clear()
            self.openai_cache.clear()
            self.faults.clear()
            self.peak_in_flight = self.in_flight
            if self.limiter is not None:
                self.limiter.reset()

    # request handling (called from handler threads) ------------------------------------------
    def _arrive(self, endpoint: str, provider: Provider, raw: bytes) -> tuple[RecordedRequest, Any]:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            record = RecordedRequest(len(self._requests), endpoint, provider, self.clock())
            record.body = body if self.keep_bodies else None
            if isinstance(body, Mapping) and isinstance(body.get("model"), str):
                record.model = body["model"]
            self._requests.append(record)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            if self.in_flight >= self.gather:
                self._gathered.set()
        return record, body

    def _finish(self, record: RecordedRequest, status: int | None, fault: str | None) -> None:
        with self._lock:
            record.status, record.finish = status, self.clock()
            record.fault = fault or record.fault
            self.in_flight -= 1

    def _admit(self, record: RecordedRequest) -> tuple[Admission | None, Fault | None]:
        """The rate limit's verdict, then the fault to serve (generation requests only)."""
        if record.endpoint == "count_tokens":
            return None, None
        with self._lock:
            admission = self.limiter.admit() if self.limiter else None
            if admission is not None and not admission.allowed:
                record.fault = "rate_limit"
                return admission, None
            fault = self.faults.next()
            record.fault = fault.kind if fault else None
            return admission, fault

    def hold_until(self, count: int) -> None:
        """From now on, hold answers until `count` requests are in flight at once (``gather``)."""
        with self._lock:
            self.gather = count
            if count <= 1 or self.in_flight >= count:
                self._gathered.set()
            else:
                self._gathered.clear()

    def _await_company(self) -> None:
        """Hold an answer until `gather` requests have been in flight at once (see the class)."""
        if not self._gathered.is_set():
            self._gathered.wait(GATHER_WAIT_S)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    fake: FakeLLMServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: httpx2 pools connections
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.fake._lock:
            self.server.fake._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.fake._lock:
            self.server.fake._connections.discard(self.connection)
        super().finish()

    def do_POST(self) -> None:
        handle_post(self, self.server.fake)

    def do_GET(self) -> None:
        handle_post(self, self.server.fake)  # answered with a 404 in the provider's shape
