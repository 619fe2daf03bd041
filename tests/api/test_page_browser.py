"""The page at `/` in a real browser: Playwright driving the system's Chromium against a real
`ctxr serve` with a bearer token, over the session's examples index (real embedder).

It types a query, moves through the hits with the keyboard, opens one in the document view,
reads the index view, and walks the token flow: the page opens without the token, its data
does not (401), a wrong token is refused, the right one is kept for the tab only. Every request
the page makes is watched: none may leave the server (no CDN, works offline).

Needs the `ui-test` extra (playwright) and Chromium at /usr/bin/chromium (Debian's package;
`playwright install`, which downloads a browser, is not used); without them this module skips.
CI installs both in a step of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.index import BuiltIndex
from tests.fixtures.serve_process import ctxr_serve
from tests.fixtures.trials import write_trial

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the ui-test extra")
CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("no Chromium at /usr/bin/chromium: apt-get install chromium",
                allow_module_level=True)  # fmt: skip

TOKEN = "browser-test-token"
QUERY = "how do I restore a backup?"
@pytest.fixture(scope="module")
def served(examples_index: BuiltIndex, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`ctxr serve` through its CLI entry point, with a token and a trial report, until the
    module is done."""
    folder = tmp_path_factory.mktemp("serve")
    trial = write_trial(folder / "ctxr-trial").parent  # the folder, as --out names it
    with ctxr_serve(examples_index, folder / "serve.log", "--trial", str(trial),
                    env={"CTXR_API_TOKEN": TOKEN}) as url:  # fmt: skip
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


class Page:
    """A tab on the server that records every request the page makes elsewhere."""

    def __init__(self, browser: Any, url: str, width: int = 1280, height: int = 860) -> None:
        self.url = url
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.elsewhere: list[str] = []
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.context.route("**/*", self._only_the_server)

    def _only_the_server(self, route: Any) -> None:
        if route.request.url.startswith(self.url + "/"):
            route.continue_()
        else:
            self.elsewhere.append(route.request.url)
            route.abort()

    def status(self, path: str, token: str | None = None) -> int:
        """The status a fetch from the page itself gets (same origin, as the page's own)."""
        script = """async ([path, token]) => {
            const headers = token ? {Authorization: 'Bearer ' + token} : {};
            return (await fetch(path, {headers})).status;
        }"""
        status: int = self.page.evaluate(script, [path, token])
        return status

    def give_token(self, token: str) -> None:
        dialog = self.page.locator("#token-dialog")
        dialog.wait_for(state="visible")
        self.page.fill("#token", token)
        self.page.press("#token", "Enter")

    def close(self) -> None:
        assert self.errors == [], self.errors  # no script error on the way
        assert self.elsewhere == [], self.elsewhere  # nothing from a CDN: works offline
        self.context.close()


@pytest.fixture
def tab(browser: Any, served: str) -> Iterator[Page]:
    opened = Page(browser, served)
    yield opened
    opened.close()


def _in_view(page: Any, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    viewport = page.viewport_size
    return bool(box and box["y"] >= 0 and box["y"] + min(box["height"], 200) <= viewport["height"])


def test_the_token_flow(tab: Page) -> None:
    page = tab.page
    page.goto(tab.url + "/")  # the shell needs no token
    page.locator("#health.ok").wait_for()  # /health is open too
    assert tab.status("/overview") == 401 and tab.status("/search") == 401
    assert tab.status("/overview", "wrong") == 401

    tab.give_token("wrong")  # the page asked for the token on its first refused request
    page.locator("#token-error", has_text="refused").wait_for()
    tab.give_token(TOKEN)
    page.locator("#token-dialog").wait_for(state="hidden")
    page.wait_for_function("token => sessionStorage.getItem('ctxr.token') === token", arg=TOKEN)
    page.fill("#q", QUERY)
    page.press("#q", "Enter")
    page.locator(".hit").first.wait_for()

    page.reload()  # kept for this tab: no second prompt
    page.locator(".hit").first.wait_for()
    assert page.locator("#token-dialog").is_hidden()

    other = Page(tab.context.browser, tab.url)  # a new tab's storage is its own: asked again
    try:
        other.page.goto(tab.url + "/#/index")
        other.page.locator("#token-dialog").wait_for(state="visible")
        other.page.click("#token-cancel")
        other.page.locator("#index-status.error", has_text="CTXR_API_TOKEN").wait_for()
    finally:
        other.close()


def test_search_explains_each_hit_and_opens_its_document(tab: Page) -> None:
    page = tab.page
    page.goto(tab.url + "/")
    tab.give_token(TOKEN)  # asked once, for the search form's kinds and languages
    page.locator("#main").focus()
    page.keyboard.press("/")  # focuses the search box from anywhere else
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type(QUERY)
    page.keyboard.press("Enter")
    hits = page.locator(".hit")
    hits.first.wait_for()
    assert 1 < hits.count() <= 10
    first = hits.first
    assert first.locator("a.source").inner_text() == "examples/docs/backup-restore.md"
    first.locator("mark").first.wait_for()  # the words BM25 matched, marked
    marked = {m.lower() for m in first.locator("mark").all_inner_texts()}
    assert marked & {"restore", "backup", "backups", "restored"}
    assert page.locator("#search-terms code").all_inner_texts()[-2:] == ["restor", "backup"]
    assert first.locator(".trail li").count() >= 1  # the heading trail
    assert "backup-restore.md" in first.locator(".context").inner_text()
    bars = first.locator(".score")
    names = [bars.nth(i).get_attribute("data-score") for i in range(bars.count())]
    assert {"dense", "bm25", "fused"} <= set(names)
    fill = first.locator(".score[data-score='fused'] .fill")
    assert fill.evaluate("el => el.getBoundingClientRect().width") > 0
    assert "#1" in first.locator(".score[data-score='fused'] .score-value").inner_text()

    # Keyboard: down from the box to the hits, Enter opens the focused hit's document.
    page.focus("#q")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    second = hits.nth(1)
    assert second.locator("a.source").evaluate("el => el === document.activeElement")
    chunk_id = second.get_attribute("data-chunk")
    offsets = second.locator(".offsets").inner_text()
    page.keyboard.press("Enter")

    hit = page.locator(f"#chunk-{chunk_id}")
    hit.wait_for()
    assert "#/doc/" in page.url
    assert hit.get_attribute("aria-current") == "true" and "is-hit" in hit.get_attribute("class")
    assert hit.evaluate("el => el === document.activeElement")
    page.wait_for_function(
        """id => { const r = document.getElementById('chunk-' + id).getBoundingClientRect();
                   return r.top >= 0 && r.top < window.innerHeight; }""",
        arg=chunk_id,
    )  # scrolled into view
    hit.locator("mark").first.wait_for()
    assert f"characters {offsets}" in hit.locator(".chunk-meta").inner_text()  # the same span
    chunks = page.locator(".chunk")
    assert chunks.count() > 2
    for i in range(chunks.count()):  # every chunk: offsets, tokens, its context and its kind
        meta = chunks.nth(i).locator(".chunk-meta").inner_text()
        assert "characters" in meta and "tokens" in meta
        context = chunks.nth(i).locator(".chunk-context")
        assert context.locator(".label").text_content() == "Outline context"
        assert "backup-restore.md" in context.locator(".context-text").inner_text()
    assert page.locator(".docmap .seg").count() == chunks.count()
    assert page.locator(".docmap .seg-hit").count() == 1

    page.keyboard.press("Escape")  # back to the hits, the opened one focused
    page.locator("#view-search").wait_for()
    page.wait_for_function("document.activeElement.closest('.hit') !== null")
    assert hits.nth(1).locator("a.source").evaluate("el => el === document.activeElement")


def test_the_index_view(tab: Page) -> None:
    page = tab.page
    page.goto(tab.url + "/#/index")
    tab.give_token(TOKEN)
    page.locator(".histogram").wait_for()
    cards = page.locator(".cards").first.inner_text()
    assert "DOCUMENTS" in cards.upper() and "\n10\n" in cards
    assert page.locator(".hbars li").count() >= 5
    kinds = page.locator("#sec-by-kind + .table-wrap tbody th").all_inner_texts()
    assert set(kinds) == {"markdown", "code", "text"}
    body = page.locator("#index-body").inner_text()
    assert "Nothing was skipped." in body
    assert "No LLM wrote contexts" in body  # outline contexts: no ledger
    assert "onnx:all-MiniLM-L6-v2-int8" in body


def test_the_trial_view(tab: Page) -> None:
    page = tab.page
    page.goto(tab.url + "/#/trial")
    tab.give_token(TOKEN)
    page.locator(".verdict").wait_for()
    assert page.locator(".verdict").inner_text().startswith("LLM contexts pay on this sample")
    rows = page.locator("#sec-scores + .table-wrap tbody th").all_inner_texts()
    assert rows == ["none", "outline", "llm (anthropic/claude-haiku-4-5)"]
    assert page.locator("#sec-scores + .table-wrap tbody .interval").count() == 3 * 4
    significant = page.locator(".comparisons li.significant").all_inner_texts()
    assert len(significant) == 1 and significant[0].startswith("llm vs outline: +12.0 points")
    assert "$0.1000" in page.locator("#trial-body").inner_text()  # the corpus's batch projection
    assert page.locator('.views a[data-view="trial"]').get_attribute("aria-current") == "page"


def test_filters_narrow_the_hits_on_a_phone(browser: Any, served: str) -> None:
    tab = Page(browser, served, width=390, height=844)
    try:
        page = tab.page
        page.goto(served + "/")
        tab.give_token(TOKEN)
        page.locator("#f-kind option[value='code']").wait_for(state="attached")
        page.select_option("#f-kind", "code")
        page.fill("#q", "rate limit")
        page.press("#q", "Enter")
        page.locator(".hit").first.wait_for()
        sources = page.locator(".hit a.source").all_inner_texts()
        assert sources and all(s.endswith((".go", ".py", ".ts")) for s in sources)
        assert "kind=code" in page.url
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390  # nothing wider than the phone's screen
    finally:
        tab.close()
