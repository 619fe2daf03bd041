"""A live index beside a running server, with real processes: `ctxr serve` owns the shard,
`ctxr search` and `ctxr watch` on the same index reach it through its owner file, `ctxr index`
is refused naming it, and a server killed with SIGKILL leaves a stale file that is ignored.

Before, a running `ctxr serve` made every other command on its index fail ("in use by another
ctxr process"). The corpus is two small files and the embedder the embedded default (with the
session's embedding cache); waits poll with generous deadlines and assert only that the thing
happens, never how fast (the delay is printed, and measured in bench/speed/watch_delay.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxr.cli import main
from ctxr.index.owner import OWNER_NAME, Owner, announce, live_owner, read_owner

# Every test starts real `ctxr serve` or `ctxr watch` processes: seconds each.
pytestmark = pytest.mark.slow

DEADLINE = 120.0  # seconds: far above what any step takes, on a loaded machine too


@dataclass
class Child:
    """A `ctxr` subprocess whose output lines are collected as they come."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def text(self) -> str:
        return "\n".join(self.lines)


def start(args: list[str], cwd: Path, env: dict[str, str]) -> Child:
    command = [sys.executable, "-c", _MAIN]
    process = subprocess.Popen(
        [*command, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    child = Child(process)

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            child.lines.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return child


# SIGINT back to Python's handler first: a suite started as a background job (`pytest &` in a
# non-interactive shell) runs with SIGINT ignored, children inherit that, and the Ctrl-C these
# tests send would be lost.
_MAIN = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from ctxr.cli import main; main()"
)


def wait_for(what: str, check: Callable[[], bool], child: Child | None = None) -> float:
    """Poll `check` until it holds; the seconds it took (printed, never asserted)."""
    started = time.monotonic()
    while not check():
        if child is not None and child.process.poll() is not None:
            pytest.fail(f"{what}: the process exited {child.process.returncode}:\n{child.text()}")
        if time.monotonic() - started > DEADLINE:
            pytest.fail(f"{what}: not within {DEADLINE} s" + (f"\n{child.text()}" if child else ""))
        time.sleep(0.1)
    return time.monotonic() - started


@pytest.fixture
def corpus(tmp_path: Path, embed_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two files in `docs/`, indexed from `tmp_path` into `idx/` as `ctxr index docs` does."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXR_CACHE_DIR", str(embed_cache_dir))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "otters.md").write_text("# Otters\n\nThe otter keeps a pebble in its pocket.\n")
    (docs / "lighthouse.md").write_text("# Lighthouse\n\nThe keeper winds the lamp at dusk.\n")
    result = CliRunner().invoke(main, ["index", "docs", "--index", "idx"])
    assert result.exit_code == 0, result.output
    return docs


@pytest.fixture
def server(corpus: Path, tmp_path: Path) -> Iterator[Child]:
    child = start(["serve", "--index", "idx", "--port", "0"], tmp_path, dict(os.environ))
    wait_for("the server owns the index", lambda: live_owner(tmp_path / "idx") is not None, child)
    yield child
    assert child.stop() == 0, child.text()
    assert not (tmp_path / "idx" / OWNER_NAME).exists()  # withdrawn when it let the shard go


def search(query: str, *extra: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(main, ["search", query, "--index", "idx", "--json", *extra])
    assert result.exit_code == 0, result.output
    hits: list[dict[str, object]] = json.loads(result.output)["hits"]  # ctxr.hits/1
    return hits


def sources(query: str) -> set[object] | None:
    """The sources a BM25 search finds, or None when the search failed (a local update holds
    the index for a moment): a failed look is no answer, so "not found" never reads as gone."""
    try:
        return {h["source"] for h in search(query, "--mode", "bm25")}
    except AssertionError:
        return None


def found(source: str, query: str) -> bool:
    seen = sources(query)
    return seen is not None and source in seen


def gone(source: str, query: str) -> bool:
    seen = sources(query)
    return seen is not None and source not in seen


def updated(child: Child, words: str) -> bool:
    """Whether the watcher has printed an update line with `words` ("1 removed")."""
    return any("changed:" in x and words in x for x in child.lines)


def test_search_goes_through_the_server_and_prints_its_hits(server: Child, tmp_path: Path) -> None:
    owner = live_owner(tmp_path / "idx")
    assert owner is not None and owner.pid == server.process.pid
    assert (os.stat(tmp_path / "idx" / OWNER_NAME).st_mode & 0o777) == 0o600
    hits = search("otter pebble", "-k", "2")
    assert hits[0]["source"] == "docs/otters.md" and hits[0]["scores"]
    # The same hits as the server's own answer, printed by the CLI's code for local hits.
    import httpx

    answer = httpx.post(
        owner.url + "/search",
        json={"query": "otter pebble", "k": 2},
        headers={"Authorization": f"Bearer {owner.token}"},
    ).json()
    assert hits == answer["hits"]
    table = CliRunner().invoke(main, ["search", "otter pebble", "--index", "idx"])
    assert table.exit_code == 0 and "otters.md" in table.output
    batch = tmp_path / "queries.jsonl"
    batch.write_text('{"id": "q1", "query": "lamp keeper"}\n{"id": "q2", "query": "otter"}\n')
    lines = CliRunner().invoke(main, ["search", "--queries", str(batch), "--index", "idx"])
    assert [json.loads(x)["id"] for x in lines.output.splitlines()] == ["q1", "q2"]
    refused = CliRunner().invoke(main, ["search", "otter", "--index", "idx", "--rrf-k", "10"])
    assert refused.exit_code == 2 and "--rrf-k" in refused.output


def test_index_is_refused_naming_the_server(server: Child, tmp_path: Path) -> None:
    for args in (["index", "docs"], ["index", "docs", "--rebuild"]):
        result = CliRunner().invoke(main, [*args, "--index", "idx"])
        assert result.exit_code == 2
        message = " ".join(result.output.split())
        assert f"pid {server.process.pid}" in message and "http://127.0.0.1:" in message
        assert "ctxr watch" in message
    assert search("otter pebble")  # --rebuild deleted nothing under the server


def test_watch_beside_the_server_makes_a_saved_file_searchable(
    server: Child, corpus: Path, tmp_path: Path
) -> None:
    watch = start(["watch", "docs", "--index", "idx"], tmp_path, dict(os.environ))
    try:
        wait_for("the first sync", lambda: any("changed:" in x for x in watch.lines), watch)
        (corpus / "walrus.md").write_text("# Walrus\n\nThe walrus hums a quiet zeppelin song.\n")
        delay = wait_for("the saved file is found",
                         lambda: found("docs/walrus.md", "walrus zeppelin"), watch)  # fmt: skip
        print(f"saved -> searchable through the server: {delay:.2f} s")
        (corpus / "lighthouse.md").unlink()
        # The watcher's line says the deletion was written; only then is "not found" news.
        wait_for("the deletion is written", lambda: updated(watch, "1 removed"), watch)
        wait_for("the deleted file is gone",
                 lambda: gone("docs/lighthouse.md", "keeper lamp dusk"), watch)  # fmt: skip
    finally:
        code = watch.stop()
    assert code == 0, watch.text()
    assert "stopped" in watch.text()
    updates = [x for x in watch.lines if "changed:" in x]
    assert updates and all(f"pid {server.process.pid}" in x for x in updates)
    assert any("1 indexed" in x for x in updates) and any("1 removed" in x for x in updates)


def test_watch_alone_keeps_the_index_live_and_searchable(corpus: Path, tmp_path: Path) -> None:
    watch = start(["watch", "docs", "--index", "idx", "--debounce", "50"], tmp_path,
                  dict(os.environ))  # fmt: skip
    try:
        wait_for("the first sync", lambda: any("changed:" in x for x in watch.lines), watch)
        (corpus / "sub").mkdir()
        (corpus / "sub" / "heron.md").write_text("# Heron\n\nThe heron fishes at the weir.\n")
        delay = wait_for("the saved file is found",
                         lambda: found("docs/sub/heron.md", "heron weir"), watch)  # fmt: skip
        print(f"saved -> searchable, watcher alone: {delay:.2f} s")
        (corpus / "otters.md").unlink()
        wait_for("the deletion is written", lambda: updated(watch, "1 removed"), watch)
        wait_for("the deleted file is gone", lambda: gone("docs/otters.md", "otter pebble"), watch)
    finally:
        code = watch.stop()
    assert code == 0, watch.text()
    assert not any("through" in x for x in watch.lines)


def test_a_deleted_index_under_serve_and_watch_is_never_rebuilt_from_one_edit(
    server: Child, corpus: Path, tmp_path: Path
) -> None:
    # Before, the watcher wrote a new index holding only the edited file, the server reopened
    # it, and /health said ok while searches answered from one document.
    import httpx

    owner = live_owner(tmp_path / "idx")
    assert owner is not None
    watch = start(["watch", "docs", "--index", "idx"], tmp_path, dict(os.environ))
    try:
        wait_for("the first sync", lambda: updated(watch, "unchanged"), watch)
        shutil.rmtree(tmp_path / "idx")
        (corpus / "otters.md").write_text("# Otters\n\nThe otter now hums a tune.\n")
        deadline = time.monotonic() + DEADLINE
        while watch.process.poll() is None:  # the watcher stops by itself, saying why
            assert time.monotonic() < deadline, watch.text()
            time.sleep(0.1)
    finally:
        code = watch.stop()
    assert code == 2, watch.text()
    assert "an update never creates one" in watch.text() and "ctxr index" in watch.text()
    assert not (tmp_path / "idx" / "manifest.json").exists()
    health = httpx.get(owner.url + "/health", headers={"Authorization": f"Bearer {owner.token}"})
    assert health.status_code == 503 and "was deleted" in health.json()["reason"]
    assert "Traceback" not in watch.text()


def test_a_killed_servers_owner_file_is_ignored(corpus: Path, tmp_path: Path) -> None:
    server = start(["serve", "--index", "idx", "--port", "0"], tmp_path, dict(os.environ))
    wait_for("the server owns the index", lambda: live_owner(tmp_path / "idx") is not None, server)
    stale = read_owner(tmp_path / "idx")
    assert stale is not None
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL  # no shutdown: the file stays
    assert read_owner(tmp_path / "idx") == stale
    assert live_owner(tmp_path / "idx") is None
    assert search("otter pebble")[0]["source"] == "docs/otters.md"  # opened here, directly
    # A file naming a live process (this one) that does not hold the shard is stale too.
    announce(tmp_path / "idx", Owner(os.getpid(), "http://127.0.0.1:9", "t", str(tmp_path)))
    assert live_owner(tmp_path / "idx") is None
    result = CliRunner().invoke(main, ["index", "docs", "--index", "idx"])
    assert result.exit_code == 0, result.output
