"""Who owns an index's shard: the `ctxr serve` that holds it open, announced in `owner.json`.

The embedded qdrant-edge shard can be open in one process only: qdrant-edge takes an exclusive
lock on the shard's write-ahead log when it loads it, and its Python binding (0.9) has no
read-only or shared open. So one process owns the shard and the others reach it through that
process. A `ctxr serve` that has the shard open writes ``<index>/owner.json`` (its pid, the
loopback URL it answers on, a token made for this run, its working directory), readable only by
its user, and removes it when it lets the shard go. `ctxr search` and `ctxr watch` read it and
go through the server; `ctxr index` is refused while it stands, naming the server.

A server killed with SIGKILL leaves its file behind. An owner is believed only while its pid is
alive *and* the shard is locked by someone (`EdgeStore.held`): a dead process, or a pid reused
by an unrelated process after the kernel released the dead server's lock, reads as no owner, so
a stale file is ignored (and overwritten by the next server), never obeyed.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ctxr.atomic_write import write_atomically
from ctxr.errors import IndexInUseError
from ctxr.index.store.edge import SHARD_DIR, EdgeStore

OWNER_NAME = "owner.json"


@dataclass(frozen=True, slots=True)
class Owner:
    pid: int
    url: str  # loopback, e.g. http://127.0.0.1:8000
    token: str  # made per run; the server accepts it like CTXR_API_TOKEN
    cwd: str  # relative document paths are read from here
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @classmethod
    def for_this_process(cls, url: str) -> Owner:
        return cls(pid=os.getpid(), url=url, token=secrets.token_urlsafe(32), cwd=os.getcwd())

    def describe(self) -> str:
        return f"`ctxr serve` (pid {self.pid}, {self.url})"


def announce(index_dir: Path, owner: Owner) -> None:
    """Write the owner file atomically, mode 0600: its token is as private as the index."""
    write_atomically(index_dir / OWNER_NAME, json.dumps(asdict(owner), indent=1), mode=0o600)


def withdraw(index_dir: Path, owner: Owner) -> None:
    """Remove the owner file if it is still this owner's (a newer server may have replaced it)."""
    if read_owner(index_dir) == owner:
        (index_dir / OWNER_NAME).unlink(missing_ok=True)


def read_owner(index_dir: Path) -> Owner | None:
    try:
        body = json.loads((index_dir / OWNER_NAME).read_text(encoding="utf-8"))
        return Owner(
            pid=int(body["pid"]),
            url=str(body["url"]),
            token=str(body["token"]),
            cwd=str(body["cwd"]),
            started_at=str(body.get("started_at", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, half-written by a dying process, or not ours: not an owner


def live_owner(index_dir: Path) -> Owner | None:
    """The server that owns the index now, or None (no file, or a stale one)."""
    owner = read_owner(Path(index_dir))
    if owner is None or not _alive(owner.pid):
        return None
    if not EdgeStore.held(Path(index_dir) / SHARD_DIR):
        return None  # the pid lives on in another process; the dead server's lock is gone
    return owner


def refuse_if_owned(index_dir: Path, doing: str) -> None:
    """Raise `IndexInUseError` naming the server when a live one owns the index."""
    owner = live_owner(index_dir)
    if owner is not None:
        raise IndexInUseError(owned_message(index_dir, owner, doing))


def owned_message(index_dir: Path, owner: Owner, doing: str = "write to it") -> str:
    return (
        f"the index at {index_dir} is served by {owner.describe()}, which holds it open; "
        f"to {doing}, stop that server first (Ctrl-C, or kill {owner.pid}), or leave it "
        f"running: `ctxr watch PATH... --index {index_dir}` sends changes through it, "
        f"`ctxr search` goes through it by itself, and Python can search {owner.url} "
        "(base_url= in the LangChain and LlamaIndex retrievers)"
    )


def cwd_mismatch(roots: list[str], client_cwd: str, server_cwd: str) -> str | None:
    """Why relative `roots` would name other documents in a server running elsewhere, or None.

    A document is named by its path as seen from where it was indexed (`docs/a.md`), so a
    server can index a watcher's relative paths only from the watcher's own directory."""
    if all(os.path.isabs(r) for r in roots) or _same_dir(client_cwd, server_cwd):
        return None
    return (
        f"`ctxr serve` runs in {server_cwd} and `ctxr watch` in {client_cwd}: a document is "
        "named by its path as seen from where it is indexed, so relative paths would name "
        f"other documents; run `ctxr watch` from {server_cwd}, or give it absolute paths"
    )


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True
