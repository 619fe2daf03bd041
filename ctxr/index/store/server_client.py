"""Reaching a Qdrant server: its URL (redacted for messages), a client, and its errors as ctxr's.

`connect` also accepts a `file:` URL, which opens qdrant-client's local mode on disk: the same
code path without a server, brute force in Python, for tests and small trials only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ctxr.errors import ConfigError, IndexError_


def redact(url: str) -> str:
    """The URL without any user:password part, fit for messages."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def connect(url: str, api_key: str | None = None, timeout: int = 60) -> QdrantClient:
    """A client for `url`: http(s) for a server, `file:` for qdrant-client's local mode."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return QdrantClient(path=parts.path or parts.netloc)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"CTXR_QDRANT_URL {redact(url)!r} is not an http(s):// URL; "
            "use e.g. http://localhost:6333 (or unset it for the embedded index)"
        )
    # No version probe on construction (qdrant-client >= 1.13): the first real call reports.
    return QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)


@contextmanager
def server_errors(where: str, action: str, secret: str | None = None) -> Iterator[None]:
    """Turn qdrant-client's exceptions into ctxr errors naming the server and the fix."""
    try:
        yield
    except UnexpectedResponse as exc:
        if exc.status_code in (401, 403):
            raise IndexError_(
                f"the Qdrant server at {where} refused the request ({exc.status_code}) while "
                f"{action}; set CTXR_QDRANT_API_KEY to the server's API key"
            ) from None
        detail = _scrub(exc.content.decode("utf-8", "replace")[:200], secret)
        raise IndexError_(
            f"the Qdrant server at {where} answered {exc.status_code} while {action}: {detail}; "
            "check the server's log and CTXR_QDRANT_* settings"
        ) from None
    except ResponseHandlingException as exc:
        raise IndexError_(
            f"cannot reach the Qdrant server at {where} while {action} "
            f"({type(exc.source).__name__}: {_scrub(str(exc.source), secret)}); start it "
            "(docker run -p 6333:6333 qdrant/qdrant) or fix CTXR_QDRANT_URL"
        ) from None


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text
