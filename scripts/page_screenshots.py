"""Screenshots of the page at `/` of `ctxr serve` for the docs: docs/assets/ui-*.png.

The repository's `examples/` (plus one binary file, so the index view has a skipped file to
show) are indexed with `ctxr index` in a temporary directory, with LLM contexts written by the
test suite's loopback emulator of the Anthropic API (`tests/fakes/llm_server.py`: its contexts
name the document and the chunk's first words; a real model writes better ones) priced at
claude-sonnet-4-5's rates, so the index view has an LLM ledger. Then `ctxr serve` runs on it and
Playwright drives the system's Chromium (the `ui-test` extra; no browser is downloaded) through
the three views. Each PNG is reduced to a 256-colour palette (Pillow) to stay small.

Usage::

    python scripts/page_screenshots.py [--out docs/assets] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.llm_server import FakeLLMServer  # noqa: E402
from PIL import Image  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

QUERY = "how do I restore a backup?"
WIDTH, HEIGHT = 1200, 820
CLI = [sys.executable, "-c", "from ctxr.cli import main; main()"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assets")
    parser.add_argument("--chromium", type=Path, default=Path("/usr/bin/chromium"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        corpus = Path(tmp) / "corpus"
        shutil.copytree(ROOT / "examples", corpus / "examples")
        (corpus / "examples" / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
        env = _env(llm, Path(tmp))
        index = Path(tmp) / "idx"
        subprocess.run([*CLI, "index", "examples", "--index", str(index)], cwd=corpus, env=env,
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        port = _free_port()
        server = subprocess.Popen([*CLI, "serve", "--index", str(index), "--port", str(port)],
                                  cwd=corpus, env=env, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_for(url, server)
            _shoot(url, args.chromium, args.out)
        finally:
            server.terminate()
            server.wait(timeout=30)
    for name in ("ui-search", "ui-document", "ui-index"):
        path = args.out / f"{name}.png"
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size / 1024:.0f} KB")


def _env(llm: FakeLLMServer, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXR_", "ANTHROPIC_",
                                                                      "OPENAI_"))}  # fmt: skip
    env.update(llm.env())
    env.update(
        CTXR_LLM_PROVIDER="anthropic",
        CTXR_LLM_MODEL="claude-sonnet-4-5",  # caches prefixes from 1,024 tokens on
        CTXR_LLM_GROUP_SIZE="1",  # one request per chunk: the emulator's plainest contexts
        CTXR_CACHE_DIR=str(tmp / "cache"),
        PYTHONPATH=str(ROOT),  # this checkout's ctxr, wherever the command runs
    )
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"ctxr serve exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise SystemExit("ctxr serve did not become ready within 120 s")


def _shoot(url: str, chromium: Path, out: Path) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT}, color_scheme="light")
        page.goto(url + "/")
        page.fill("#q", QUERY)
        page.press("#q", "Enter")
        page.locator(".hit mark").first.wait_for()
        page.locator("#search-terms code").first.wait_for()
        page.evaluate("document.activeElement.blur()")
        page.set_viewport_size({"width": WIDTH, "height": 1000})  # the first two hits
        _save(page, out / "ui-search.png")
        page.set_viewport_size({"width": WIDTH, "height": HEIGHT})

        page.locator(".hit a.source").nth(1).click()
        page.locator(".chunk.is-hit mark").first.wait_for()
        _save(page, out / "ui-document.png")

        page.goto(url + "/#/index")
        page.locator(".histogram").wait_for()
        _save(page, out / "ui-index.png", full_page=True)
        browser.close()


def _save(page: Page, path: Path, full_page: bool = False) -> None:
    page.mouse.move(0, 0)  # no hover effect in the picture
    page.screenshot(path=str(path), full_page=full_page)
    with Image.open(path) as shot:
        small = shot.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        small.save(path, optimize=True)


if __name__ == "__main__":
    main()
