"""Whether a base URL is a server on the user's own machine or network, and what that changes.

A model served from loopback, localhost or a private address (Ollama, vLLM, llama.cpp, LM
Studio) bills nothing, and on a CPU it is slow: a request that a hosted API answers in two
seconds takes minutes there. So a local base URL prices at $0 unless a price file names the
model, and gets a longer default timeout when the user set none.

`LOCAL_TIMEOUT_SECONDS` is measured, not guessed (docs/how-to/local-models.md): llama.cpp with
SmolLM2-135M on 2 shared CPU cores read prompts at about 75 tokens/s and wrote about 11
tokens/s uncached (20-30 with the prefix cached); a full 4,096-token slot with a 1,000-token
answer is then ~55 s + ~90 s, and twice that with a second slot sharing the cores: ~300 s. The
default doubles it again, for a larger model or a busier machine; a request that hangs still
ends.
"""

from __future__ import annotations

import ipaddress
from typing import Final
from urllib.parse import urlsplit

LOCAL_TIMEOUT_SECONDS: Final = 600.0
_LOCAL_NAMES: Final = frozenset({"localhost", "host.docker.internal"})


def is_local_url(url: str | None) -> bool:
    """Whether `url` points at loopback, localhost, a private or link-local address, or a
    `.local` / `.internal` / `.lan` name: a server the user runs, not a hosted API."""
    if not url:
        return False
    host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").lower()
    if not host:
        return False
    if host in _LOCAL_NAMES or host.endswith((".localhost", ".local", ".internal", ".lan")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
