"""HTML: extraction to Markdown-like text, its splitting, loading and indexing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.enrich.load.documents import load_document
from ctxr.enrich.load.html import extract_html
from ctxr.enrich.split import split_document
from ctxr.errors import LoadError
from ctxr.pipeline.build import build_index
from ctxr.tokens import count_tokens
from ctxr.types import Document, text_hash
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.chunks import split_checked
from tests.fixtures.documents import make_document

NOISE = ("SiteBanner", "NavLink", "secretScript", "secret-style", "SiteFooter", "NoScript",
         "HiddenText", "tracking", "AsideText", "a comment")  # fmt: skip

ROWS = "\n".join(
    f"<tr><td>lantern-{i}</td><td>{i * 7} mm</td><td>brass &amp; glass, model {i}</td></tr>"
    for i in range(60)
)
CODE = "\n".join(f"    step_{i} = light(wick_{i}) &lt; {i}  # `tick`" for i in range(12))
PAGE = f"""<!DOCTYPE html>
<html lang="de"><head><meta charset="utf-8"><title>Brass &amp; Lanterns — Guide</title>
<style>body {{ color: red; }} .secret-style {{}}</style>
<script>var secretScript = "<p>not text</p>";</script>
</head><body>
<header class="site"><a href="/">SiteBanner</a></header>
<nav><ul><li><a href="/a">NavLinkOne</a></li><li>NavLinkTwo</li></ul></nav>
<main><article>
<header><h1>Caf&eacute; lanterns</h1></header>
<p>Lanterns   made of <strong>brass</strong> &lt;since 1850&gt;.
Über-bright, naïve café © 2024 — 日本語のテキスト.</p>
<!-- a comment that must vanish -->
<h2>Install</h2>
<p>You need:</p>
<ul><li>a wick</li><li>oil <ul><li>kerosene</li><li>olive</li></ul></li><li><p>glass</p></li></ul>
<h3>Code</h3>
<pre><code class="language-python">def light(x):
{CODE}
    return x
</code></pre>
<p># not a heading<br>---<br>second line</p>
<h2>Sizes</h2>
<table><caption>All sizes</caption>
<thead><tr><th>Name</th><th>Size | mm</th><th>Material</th></tr></thead>
<tbody>{ROWS}</tbody></table>
<aside>AsideText</aside>
<footer>Article footer kept</footer>
</article></main>
<footer>SiteFooter</footer>
<noscript>NoScriptText</noscript>
<div hidden>HiddenText</div>
<script>trackingScript()</script>
</body></html>
"""


def html_doc(text: str) -> Document:
    page = extract_html(text)
    return make_document(page.text, "html", doc_id="page", title=page.title)


def test_extraction_drops_noise_and_keeps_structure() -> None:
    page = extract_html(PAGE)
    assert page.title == "Brass & Lanterns — Guide"
    text = page.text
    for noise in NOISE:
        assert noise not in text
    assert text.startswith("# Café lanterns\n\nLanterns made of brass <since 1850>. Über-bright")
    assert "日本語のテキスト" in text
    assert "## Install\n\nYou need:\n- a wick\n- oil\n  - kerosene\n  - olive\n- glass" in text
    assert "```python\ndef light(x):\n    step_0 = light(wick_0) < 0  # `tick`\n" in text
    assert "\\# not a heading\n\\---\nsecond line" in text  # escaped, not structure
    assert "All sizes\n\n| Name | Size \\| mm | Material |\n|---|---|---|\n| lantern-0 |" in text
    assert "Article footer kept" in text  # an article's own footer is content


@pytest.mark.parametrize("max_tokens", [64, 128, 512])
def test_split_invariants_and_structure(max_tokens: int) -> None:
    doc = html_doc(PAGE)
    chunks = split_checked(doc, max_tokens)
    for chunk in chunks:
        for noise in NOISE:
            assert noise not in chunk.text and noise not in chunk.prefix
        assert chunk.heading_path[0] == "Café lanterns"
    # the pre block is whole in one chunk when it fits, else cut only between lines
    fence = doc.text.index("```python")
    fence_end = doc.text.index("```", fence + 3) + 3
    holding = [c for c in chunks if c.start < fence_end and c.end > fence]
    if count_tokens(doc.text[fence:fence_end]) <= max_tokens:
        assert len(holding) == 1 and holding[0].start <= fence and holding[0].end >= fence_end
    doc_lines = {line.strip() for line in doc.text.split("\n")}
    for chunk in holding:
        assert chunk.text.count("```") in (0, 1, 2)
        assert all(line.strip() in doc_lines for line in chunk.text.split("\n"))
    # merged small sections carry the first one's trail, an ancestor of everything inside
    trail = ("Café lanterns", "Install", "Code")
    (code,) = [c for c in chunks if "step_3 =" in c.text]
    assert code.heading_path == trail[: len(code.heading_path)]
    if max_tokens == 64:
        assert code.heading_path == trail


def test_long_table_split_by_rows_with_header_in_prefix() -> None:
    doc = html_doc(PAGE)
    chunks = split_document(doc, max_tokens=128)
    rows = [c for c in chunks if "lantern-" in c.text]
    assert len(rows) > 2
    for chunk in rows:
        assert chunk.heading_path == ("Café lanterns", "Sizes")
        for line in chunk.text.split("\n"):  # never cut inside a row
            assert not line.startswith("| lantern") or re.fullmatch(r"\| lantern-\d+ \|.*\|", line)
    for chunk in rows[1:]:
        assert "| Name | Size \\| mm | Material |\n|---|---|---|" in chunk.prefix
        assert chunk.prefix.startswith("# Café lanterns\n## Sizes")


@pytest.mark.parametrize(
    "markup",
    [
        "<div><p>unclosed <b>bold<table><tr><td>cell</div></span>&bogus; <<>> </html>",
        "<html><body><ul><li>one<li>two</ul></p></p><h2>Head<p>text",
        "<li>stray item</li><p>after</p><td>loose cell</td></tr>",
        "<pre>never closed ``` <b>bold</b>",
        "<table><tr><td><h2>Layout</h2><p>body text</p></td></tr></table>",
        "<p>a\x00b</p>\ufeff<p>é</p>",
        "<div>" * 20000 + "deep text" + "</div>" * 20000,
    ],
)
def test_malformed_html_never_crashes(markup: str) -> None:
    doc = html_doc(markup)
    assert doc.text.strip()
    split_checked(doc, 64)


def test_layout_table_keeps_its_headings() -> None:
    text = extract_html("<table><tr><td><h2>Layout</h2><p>body text</p></td></tr></table>").text
    assert text == "## Layout\n\nbody text"


def test_title_falls_back_to_first_h1() -> None:
    assert extract_html("<body><h2>Two</h2><h1>One &amp; only</h1></body>").title == "One & only"
    assert extract_html("<p>no heading</p>").title == ""


def test_load_document_html(tmp_path: Path) -> None:
    for suffix in (".html", ".htm", ".xhtml"):
        path = tmp_path / f"page{suffix}"
        path.write_text(PAGE, encoding="utf-8")
        doc = load_document(path)
        assert doc.kind == "html"
        assert doc.title == "Brass & Lanterns — Guide"
        assert doc.text == extract_html(PAGE).text
        assert doc.sha256 == text_hash(doc.text)
    bare = tmp_path / "bare.html"
    bare.write_text("<h1>Only a heading</h1><p>and text</p>", encoding="utf-8")
    assert load_document(bare).title == "Only a heading"
    untitled = tmp_path / "untitled.htm"
    untitled.write_text("<p>just text</p>", encoding="utf-8")
    assert load_document(untitled).title == "untitled.htm"


def test_html_without_text_is_a_clear_load_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.html"
    path.write_text("<html><head><script>x()</script></head><body><nav>menu</nav></body>", "utf-8")
    with pytest.raises(LoadError) as info:
        load_document(path)
    assert "empty.html" in str(info.value)
    assert "no text" in str(info.value)


def test_build_index_with_html(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "page.html").write_text(PAGE, encoding="utf-8")
    (corpus / "notes.md").write_text("# Notes\n\nbrass lanterns\n", encoding="utf-8")
    report = build_index(
        [corpus],
        load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache"),
        embedder=HashEmbedder(),
    )
    assert report.failed == []
    assert report.documents_indexed == 2
    assert report.chunks_written > 2


def test_pathological_nesting_is_flattened_before_parsing_its_text_kept() -> None:
    # 100k nested <div>s took 97 s to parse (the HTML5 tree builder checks the open-element
    # stack on every tag); below the limit the page reaches the parser untouched.
    from ctxr.enrich.load.html import MAX_DEPTH, _flatten_deep

    depth = 100_000
    deep = "<div><b>" * depth + "deep text" + "</b></div>" * depth
    page = "<body>" + deep + "<p>after</p></body>"
    flat = _flatten_deep(page)
    assert flat.count("<div>") == MAX_DEPTH // 2 and flat.count("</div>") == MAX_DEPTH // 2
    assert flat.count("<b>") == flat.count("</b>") == MAX_DEPTH // 2
    assert extract_html(page).text == "deep text\n\nafter"
    normal = "<body>" + "<div>" * 50 + "<p>x</p>" + "</div>" * 50 + "</body>" + "<i>y</i>" * 300
    assert _flatten_deep(normal) == normal
