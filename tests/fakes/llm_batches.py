"""Batch APIs of the fake LLM server: Anthropic Message Batches and OpenAI Files + Batches.

Endpoints::

    POST /v1/messages/batches              GET /v1/messages/batches/{id}
    GET  /v1/messages/batches/{id}/results POST /v1/messages/batches/{id}/cancel
    POST /v1/files (multipart, purpose=batch)   GET /v1/files/{id}/content
    POST /v1/batches                       GET /v1/batches/{id}    POST /v1/batches/{id}/cancel

A batch ends `batch_delay_s` of server time after it was created (see `FakeLLMServer.advance`),
at the first status check from then on. Its requests are then run one by one through the same
`generate` as single requests (prompt cache, usage and `respond` included; each is recorded
with its `batch_id` and `custom_id`), and the results come back in a shuffled order.
`inject_batch(kind, times)` scripts the outcome of the next requests run: "errored"
(overloaded), "invalid" (a 400), "expired", "canceled". Limits: custom ids 1-64 of
[a-zA-Z0-9_-], unique within a batch; at most `batch_max_requests` a batch.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING, Any

from .llm_wire import BadRequest, Provider, error_body

if TYPE_CHECKING:
    from .llm_server import FakeLLMServer

CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
BATCH_PATHS = ("/v1/messages/batches", "/v1/files", "/v1/batches")
OUTCOMES = ("errored", "invalid", "expired", "canceled")


@dataclass
class FakeBatch:
    batch_id: str
    provider: Provider
    items: list[tuple[str, dict[str, Any]]]  # (custom id, request body)
    created: float
    wall_created: int = field(default_factory=lambda: int(time.time()))
    ended: bool = False
    canceled: bool = False
    lines: list[dict[str, Any]] = field(default_factory=list)  # result lines, shuffled
    counts: dict[str, int] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None


class FakeBatches:
    def __init__(self, fake: FakeLLMServer, delay_s: float, max_requests: int, seed: int) -> None:
        self.fake, self.delay_s, self.max_requests = fake, delay_s, max_requests
        self.batches: dict[str, FakeBatch] = {}
        self.files: dict[str, bytes] = {}
        self.scripted: deque[str] = deque()
        self.random = random.Random(seed)
        self.creates = 0  # batch creations accepted
        self._running = threading.Lock()  # two status checks must not run a batch twice

    def inject(self, kind: str, times: int = 1) -> None:
        if kind not in OUTCOMES:
            raise ValueError(f"unknown batch outcome {kind!r}; one of {OUTCOMES}")
        self.scripted.extend([kind] * times)

    # -- routing ------------------------------------------------------------------------------
    def handle(self, method: str, path: str, raw: bytes, content_type: str) -> tuple[int, bytes]:
        parts = path.strip("/").split("/")  # v1, messages|files|batches, ...
        try:
            if parts[1] == "messages":
                return self._anthropic(method, parts[3:], raw)
            if parts[1] == "files":
                return self._files(method, parts[2:], raw, content_type)
            return self._openai(method, parts[2:], raw)
        except BadRequest as exc:
            provider: Provider = "anthropic" if parts[1] == "messages" else "openai"
            return error_body("400", provider, str(exc))
        except KeyError as exc:
            provider = "anthropic" if parts[1] == "messages" else "openai"
            return error_body("404", provider, f"no such batch or file: {exc}")

    def _anthropic(self, method: str, rest: list[str], raw: bytes) -> tuple[int, bytes]:
        if method == "POST" and not rest:
            body = json.loads(raw or b"{}")
            items = [(r.get("custom_id"), r.get("params")) for r in body.get("requests") or []]
            batch = self._create("anthropic", items, "msgbatch_")
            return 200, _json(self._anthropic_batch(batch))
        batch = self._due(self.batches[rest[0]])
        if method == "POST" and rest[1:] == ["cancel"]:
            self._cancel(batch)
            return 200, _json(self._anthropic_batch(batch))
        if rest[1:] == ["results"]:
            if not batch.ended:
                raise BadRequest(f"batch {batch.batch_id} is still in progress")
            return 200, b"".join(_json(line) + b"\n" for line in batch.lines)
        return 200, _json(self._anthropic_batch(batch))

    def _files(self, method: str, rest: list[str], raw: bytes, ctype: str) -> tuple[int, bytes]:
        if method == "POST" and not rest:
            form = BytesParser(policy=HTTP).parsebytes(
                f"Content-Type: {ctype}\r\n\r\n".encode() + raw
            )
            fields = {
                p.get_param("name", header="content-disposition"): p for p in form.iter_parts()
            }
            if "file" not in fields or fields["purpose"].get_content().strip() != "batch":
                raise BadRequest("a batch input needs a file and purpose=batch")
            data = fields["file"].get_payload(decode=True)
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            self.files[file_id] = bytes(data)
            return 200, _json(_file_object(file_id, len(data), "batch"))
        if rest[1:] == ["content"]:
            return 200, self.files[rest[0]]
        return 200, _json(_file_object(rest[0], len(self.files[rest[0]]), "batch"))

    def _openai(self, method: str, rest: list[str], raw: bytes) -> tuple[int, bytes]:
        if method == "POST" and not rest:
            body = json.loads(raw or b"{}")
            if body.get("endpoint") != "/v1/chat/completions":
                raise BadRequest(f"endpoint {body.get('endpoint')!r} is not faked")
            data = self.files[str(body.get("input_file_id"))]
            items = []
            for line in data.decode().splitlines():
                request = json.loads(line)
                if request.get("url") != "/v1/chat/completions" or request.get("method") != "POST":
                    raise BadRequest("every line must POST to /v1/chat/completions")
                items.append((request.get("custom_id"), request.get("body")))
            batch = self._create("openai", items, "batch_")
            return 200, _json(self._openai_batch(batch))
        batch = self._due(self.batches[rest[0]])
        if method == "POST" and rest[1:] == ["cancel"]:
            self._cancel(batch)
        return 200, _json(self._openai_batch(batch))

    # -- life of a batch ----------------------------------------------------------------------
    def _create(self, provider: Provider, items: list[tuple[Any, Any]], prefix: str) -> FakeBatch:
        if not items or len(items) > self.max_requests:
            raise BadRequest(f"a batch holds 1 to {self.max_requests} requests, got {len(items)}")
        ids = [cid for cid, _ in items]
        bad = [cid for cid in ids if not isinstance(cid, str) or not CUSTOM_ID.match(cid)]
        if bad:
            raise BadRequest(f"custom_id must be 1-64 of [a-zA-Z0-9_-]: {bad[0]!r}")
        if len(set(ids)) != len(ids):
            raise BadRequest("custom_id values must be unique within a batch")
        with self.fake._lock:
            batch = FakeBatch(
                f"{prefix}{uuid.uuid4().hex[:24]}", provider, items, self.fake.clock()
            )
            self.batches[batch.batch_id] = batch
            self.creates += 1
        return batch

    def _due(self, batch: FakeBatch) -> FakeBatch:
        with self._running:
            if not batch.ended and self.fake.clock() >= batch.created + self.delay_s:
                self._run(batch)
        return batch

    def _cancel(self, batch: FakeBatch) -> None:
        with self._running:
            if not batch.ended:
                batch.canceled = True
                self._run(batch)

    def _run(self, batch: FakeBatch) -> None:
        from .llm_handler import generate

        endpoint = "messages" if batch.provider == "anthropic" else "chat.completions"
        lines, counts = [], {k: 0 for k in ("succeeded", "errored", "expired", "canceled")}
        for custom_id, body in batch.items:
            kind = (
                "canceled"
                if batch.canceled
                else (self.scripted.popleft() if self.scripted else None)
            )
            record, _ = self.fake._arrive(endpoint, batch.provider, _json(body))
            record.batch_id, record.custom_id = batch.batch_id, custom_id
            answer: dict[str, Any] | None = None
            if kind is None:
                try:
                    answer = json.loads(generate(self.fake, batch.provider, body, record))
                except BadRequest as exc:
                    kind, answer = "invalid", {"message": str(exc)}
            status = 200 if kind is None else 400 if kind == "invalid" else None
            self.fake._finish(record, status, kind)
            outcome = (
                "succeeded"
                if kind is None
                else "errored"
                if kind in ("invalid", "errored")
                else kind
            )
            counts[outcome] += 1
            lines.append(_result_line(batch.provider, custom_id, kind, answer))
        self.random.shuffle(lines)  # results come in any order: match by custom_id
        batch.lines, batch.counts, batch.ended = lines, counts, True
        if batch.provider == "openai":
            good = [
                ln
                for ln in lines
                if ln.get("error") is None and ln["response"]["status_code"] == 200
            ]
            bad = [ln for ln in lines if ln not in good]
            if good:
                batch.output_file_id = self._store(good)
            if bad:
                batch.error_file_id = self._store(bad)

    def _store(self, lines: list[dict[str, Any]]) -> str:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        self.files[file_id] = b"".join(_json(line) + b"\n" for line in lines)
        return file_id

    # -- wire shapes --------------------------------------------------------------------------
    def _anthropic_batch(self, batch: FakeBatch) -> dict[str, Any]:
        counts = dict(batch.counts) or {"succeeded": 0, "errored": 0, "expired": 0, "canceled": 0}
        counts["processing"] = 0 if batch.ended else len(batch.items)
        created = _rfc3339(batch.wall_created)
        return {
            "id": batch.batch_id,
            "type": "message_batch",
            "processing_status": "ended" if batch.ended else "in_progress",
            "request_counts": counts,
            "created_at": created,
            "expires_at": _rfc3339(batch.wall_created + 86_400),
            "ended_at": created if batch.ended else None,
            "cancel_initiated_at": created if batch.canceled else None,
            "archived_at": None,
            "results_url": (
                f"{self.fake.base_url}/v1/messages/batches/{batch.batch_id}/results"
                if batch.ended
                else None
            ),
        }

    def _openai_batch(self, batch: FakeBatch) -> dict[str, Any]:
        if not batch.ended:
            status = "in_progress"
        elif batch.canceled:
            status = "cancelled"
        else:
            status = "expired" if batch.counts.get("expired") else "completed"
        failed = sum(v for k, v in batch.counts.items() if k != "succeeded")
        return {
            "id": batch.batch_id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": "file-input",
            "completion_window": "24h",
            "status": status,
            "created_at": batch.wall_created,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "request_counts": {
                "total": len(batch.items),
                "completed": batch.counts.get("succeeded", 0),
                "failed": failed,
            },
        }


def _result_line(
    provider: Provider, custom_id: str, kind: str | None, answer: Any
) -> dict[str, Any]:
    if provider == "anthropic":
        if kind is None:
            return {"custom_id": custom_id, "result": {"type": "succeeded", "message": answer}}
        if kind in ("errored", "invalid"):
            error_type = "overloaded_error" if kind == "errored" else "invalid_request_error"
            message = (answer or {}).get("message", "Overloaded")
            error = {"type": "error", "error": {"type": error_type, "message": message}}
            return {"custom_id": custom_id, "result": {"type": "errored", "error": error}}
        return {"custom_id": custom_id, "result": {"type": kind}}
    line: dict[str, Any] = {"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": custom_id}
    if kind is None:
        response = {"status_code": 200, "request_id": uuid.uuid4().hex, "body": answer}
        return {**line, "response": response, "error": None}
    if kind in ("errored", "invalid"):
        status = 503 if kind == "errored" else 400
        body = {"error": {"message": (answer or {}).get("message", "overloaded"), "type": "error"}}
        return {**line, "response": {"status_code": status, "body": body}, "error": None}
    code = "batch_expired" if kind == "expired" else "batch_cancelled"
    return {**line, "response": None, "error": {"code": code, "message": f"request {kind}"}}


def _file_object(file_id: str, size: int, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": "batch.jsonl",
        "purpose": purpose,
        "status": "processed",
    }


def _rfc3339(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
