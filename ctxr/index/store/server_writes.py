"""Writing to a Qdrant server or cluster: batches sent in parallel, each retried while a node
is busy or restarting.

A cluster answers 503 while a shard's replica is moving or a node restarts, 429 when it sheds
load, 502/504 through a load balancer, and refuses connections for the seconds a node takes to
come back. Those answers are retried with exponential backoff (tenacity), since an upsert of the
same point ids is idempotent; anything else (a rejected key, a malformed point, a missing
collection) fails at once, named by `server_client.server_errors`. qdrant-client's own
`upload_points` retries too, but at once and on every error, which a restarting node outlasts.

Batches go out from a few threads over the one client (its HTTP pool is thread-safe): the
server's acknowledgement (`wait=True`) is still awaited for each, so once `write_batches`
returns every point is applied, and the manifest may record them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

# Statuses a busy, restarting or load-shedding cluster answers with; others are final.
TRANSIENT_STATUS = frozenset({429, 502, 503, 504})

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """How writes reach the server (`CTXR_QDRANT_WRITE_PARALLEL`, `CTXR_QDRANT_WRITE_ATTEMPTS`)."""

    parallel: int = 4
    attempts: int = 6  # ~0.5 + 1 + 2 + 4 + 8 s of backoff: a node's restart, not an outage
    max_wait: float = 8.0


def transient(exc: BaseException) -> bool:
    """Whether a failed write may succeed if sent again: no connection (a node coming back,
    a timeout) or a status in `TRANSIENT_STATUS`."""
    if isinstance(exc, ResponseHandlingException):
        return True
    return isinstance(exc, UnexpectedResponse) and exc.status_code in TRANSIENT_STATUS


def write_batches(send: Callable[[T], None], batches: Sequence[T], policy: WritePolicy) -> None:
    """`send` each batch, `policy.parallel` at a time, retrying transient failures; the first
    final failure is raised once the batches in flight have ended."""
    retrying = Retrying(
        retry=retry_if_exception(transient),
        stop=stop_after_attempt(policy.attempts),
        wait=wait_exponential(multiplier=0.5, max=policy.max_wait),
        reraise=True,
    )

    def one(batch: T) -> None:
        retrying.copy()(send, batch)  # a copy each: a Retrying's statistics are per call

    if policy.parallel <= 1 or len(batches) <= 1:
        for batch in batches:
            one(batch)
        return
    with ThreadPoolExecutor(max_workers=min(policy.parallel, len(batches))) as pool:
        for future in [pool.submit(one, batch) for batch in batches]:
            future.result()
