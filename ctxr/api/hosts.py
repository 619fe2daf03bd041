"""Which Host (and Origin) headers the servers answer: the defence against DNS rebinding.

A page on a hostile site can make a browser send requests to a server on the user's loopback:
it points its own name at 127.0.0.1 once the page is loaded (DNS rebinding), and the browser,
believing it talks to the same site, lets the page read the answers. Such a request always
carries the hostile *name* in its Host header, so both `ctxr serve` and `ctxr mcp --http`
answer only requests whose Host is

- ``localhost``, or any IP address (a rebinding page can only send a name it controls);
- the name the server was told to bind (``--host myhost.lan``);
- a name in ``CTXR_API_ALLOWED_HOSTS`` / ``--allowed-host`` (``*`` accepts every host).

Anything else is answered 421 with the fix. A browser's ``Origin`` header, when sent, must
name an accepted host too (403 otherwise), so a page elsewhere cannot drive the server blind.

On an address that listens on every interface (``0.0.0.0``, ``::``) with a bearer token set
and no names configured, every host is accepted: a rebinding page cannot send the token, and
such a server is usually reached by names nobody listed. Without a token it gets the rule
above, like a loopback server.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import Scope

LOCAL_NAMES = frozenset({"localhost"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})
ANY = "*"


@dataclass(frozen=True, slots=True)
class HostPolicy:
    names: frozenset[str]  # accepted besides localhost and IP addresses
    any_host: bool = False

    @classmethod
    def for_server(cls, bound: str, configured: Iterable[str], token_set: bool) -> HostPolicy:
        """The policy of a server bound to `bound`, with the names the user configured."""
        names = {_name(n) for n in configured if n.strip()}
        if ANY in names:
            return cls(frozenset(), any_host=True)
        if bound in WILDCARD_ADDRESSES and token_set and not names:
            return cls(frozenset(), any_host=True)
        if bound not in WILDCARD_ADDRESSES:
            names.add(_name(bound))
        return cls(frozenset(names))

    def accepts(self, host: str) -> bool:
        """Whether a Host header value (``name``, ``name:port``, ``[v6]:port``) is accepted."""
        if self.any_host:
            return True
        name = _name(_strip_port(host))
        if not name:
            return False
        return name in LOCAL_NAMES or _is_address(name) or name in self.names

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why a request is refused (status, detail), or None when its headers pass."""
        if self.any_host:
            return None
        host = origin = None
        for key, value in scope.get("headers", ()):
            if key == b"host" and host is None:
                host = value.decode("latin-1")
            elif key == b"origin" and origin is None:
                origin = value.decode("latin-1")
        if host is None:
            server = scope.get("server")
            host = server[0] if server else ""  # HTTP/1.0 without Host: the socket's address
        if not self.accepts(host):
            return 421, (
                f"this server does not answer for the host {_shown(host)!r}; reach it as "
                "localhost or by its IP address, or add the name to CTXR_API_ALLOWED_HOSTS "
                "(or --allowed-host) if you mean to serve under it"
            )
        if origin is not None and origin != "null":
            origin_host = urlsplit(origin).netloc
            if not self.accepts(origin_host):
                return 403, (
                    f"requests from pages at {_shown(origin)!r} are not answered; add its host "
                    "to CTXR_API_ALLOWED_HOSTS (or --allowed-host) to allow it"
                )
        return None


def _strip_port(host: str) -> str:
    host = host.strip()
    if host.startswith("["):  # [::1]:8000
        end = host.find("]")
        return host[1:end] if end > 0 else host
    if host.count(":") == 1:
        return host.rsplit(":", 1)[0]
    return host  # a bare name, or a bare IPv6 address


def _name(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _shown(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
