"""Save-to-searchable delay of the live index (`ctxr watch`), beside `ctxr serve` and alone.

The `examples/` corpus (10 files) is copied to a temporary `docs/` and indexed with the real
local MiniLM. Then, for each setup, the real commands run as subprocesses, as a user runs them:

- ``served``: `ctxr serve --port 0` owns the index and `ctxr watch docs` beside it sends its
  updates through the server; the probe searches the server's `POST /search` (BM25, k 50).
- ``alone``: `ctxr watch docs` by itself, opening the index for each update; the probe opens
  the index in this process for each look (`SearchService`, BM25) and closes it, as `ctxr
  search` does, so the two take turns at the shard as they would for a user.

Each trial writes a new Markdown file holding a word no other file has, and probes every
`--poll-ms` until a search for that word returns it (save -> searchable); then deletes it and
probes until it is gone (delete -> gone). The delay runs from the moment the write (or unlink)
returned to the first probe that saw the change, so it includes the watcher's debounce
(`--debounce`, ms of quiet), the update and the probe's own interval. Printed: median, p90 and
max per setup and event, the watcher's own update times (from its lines), load average before
and after.

Usage::

    python -m bench.speed.watch_delay [--trials 10] [--debounce 200] [--poll-ms 20]
        [--setups served,alone]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bench.common.checkout import CTXR, EXAMPLES, REPO, child_env
from bench.common.measure import Span, load_line, percentile, say
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.errors import CtxrError
from ctxr.index.owner import Owner, live_owner
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService

DEADLINE = 60.0
_SECONDS = re.compile(r"removed; ([0-9.]+) s")


class Child:
    def __init__(self, args: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [*CTXR, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=child_env(),
        )  # fmt: skip
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> None:
        self.process.send_signal(2)  # Ctrl-C
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def wait(check: Callable[[], bool], what: str, poll: float) -> float:
    """Seconds until `check` holds, looking every `poll` seconds."""
    span = Span()
    while not check():
        if span.seconds > DEADLINE:
            raise SystemExit(f"{what}: not within {DEADLINE} s")
        time.sleep(poll)
    return span.seconds


def served_probe(owner: Owner) -> Callable[[str], set[str]]:
    def probe(word: str) -> set[str]:
        body = json.dumps({"query": word, "k": 50, "mode": "bm25"}).encode()
        request = urllib.request.Request(
            owner.url + "/search", data=body, method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {owner.token}"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as response:
            return {h["source"] for h in json.loads(response.read())["hits"]}

    return probe


def local_probe(index_dir: Path) -> Callable[[str], set[str]]:
    settings = load_settings(index_dir=index_dir)

    def probe(word: str) -> set[str]:
        try:
            with SearchService(settings) as service:
                return {h.source for h in service.search(word, k=50, mode="bm25")}
        except CtxrError:  # the watcher has the index for an update: look again
            return set()

    return probe


def one_trial(path: Path, probe: Callable[[str], set[str]], poll: float) -> tuple[float, float]:
    """Save a file with a word of its own, wait until it is found; delete it, wait until not."""
    word = "zq" + secrets.token_hex(4)
    source = f"docs/{path.name}"
    path.write_text(f"# Live note\n\nThe {word} was saved just now.\n")
    saved = wait(lambda: source in probe(word), "saved", poll)
    path.unlink()
    return saved, wait(lambda: source not in probe(word), "gone", poll)


def run_setup(setup: str, work: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    poll = args.poll_ms / 1000
    server = None
    if setup == "served":
        server = Child(["serve", "--index", "idx", "--port", "0"], work)
        wait(lambda: live_owner(work / "idx") is not None, "the server owns the index", 0.05)
        owner = live_owner(work / "idx")
        assert owner is not None
        probe = served_probe(owner)
    else:
        probe = local_probe(work / "idx")
    watch = Child(["watch", "docs", "--index", "idx", "--debounce", str(args.debounce)], work)
    found: dict[str, list[float]] = {"save -> searchable": [], "delete -> gone": []}
    try:
        wait(lambda: any("changed:" in x for x in watch.lines), "the watcher's first sync", 0.05)
        for trial in range(args.trials):
            saved, gone = one_trial(work / "docs" / f"live-{setup}-{trial}.md", probe, poll)
            found["save -> searchable"].append(saved)
            found["delete -> gone"].append(gone)
            time.sleep(0.3)  # let the watcher settle between trials
    finally:
        watch.stop()
        if server is not None:
            server.stop()
    found["watcher update (s)"] = [
        float(m.group(1)) for x in watch.lines[1:] if (m := _SECONDS.search(x))
    ]
    return found


def main() -> None:
    parser = cli(__doc__)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--debounce", type=int, default=200)
    parser.add_argument("--poll-ms", type=int, default=20)
    parser.add_argument("--setups", default="served,alone")
    args = parser.parse_args()
    say(load_line("at start"))
    work = Path(tempfile.mkdtemp(prefix="ctxr-watch-delay-"))
    try:
        shutil.copytree(EXAMPLES, work / "docs")
        os.chdir(work)
        build_index(["docs"], load_settings(index_dir=work / "idx"))
        results = {s: run_setup(s, work, args) for s in args.setups.split(",")}
    finally:
        os.chdir(REPO)
        shutil.rmtree(work, ignore_errors=True)
    say(f"trials {args.trials}, debounce {args.debounce} ms, probe every {args.poll_ms} ms")
    say("| setup | event | n | median s | p90 s | max s |")
    say("|---|---|---:|---:|---:|---:|")
    for setup, rows in results.items():
        for event, values in rows.items():
            if values:
                say(f"| {setup} | {event} | {len(values)} | {statistics.median(values):.2f} | "
                    f"{percentile(values, 0.9):.2f} | {max(values):.2f} |")  # fmt: skip
    say(load_line("at end"))


if __name__ == "__main__":
    main()
