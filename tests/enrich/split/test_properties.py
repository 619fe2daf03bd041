"""Property tests of the splitter over generated Markdown, Python code and prose.

For every generated document and budget:

* offsets reproduce the text exactly (``doc.text[start:end] == chunk.text``);
* the chunks cover every non-whitespace character (nothing but whitespace is ever dropped);
* ``token_count`` is the exact tiktoken count and within the budget, except for a chunk that is
  one unbreakable run (no whitespace at all), which is the only excuse the issue allows;
* no chunk boundary falls strictly inside a fenced block or a table row, unless that block
  alone is over the budget;
* splitting is deterministic.

Generators build the documents piece by piece and record where each fence and table row lies,
so the structural property is checked against the truth rather than against a second parser.
"""

from __future__ import annotations

import ast
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ctxr.enrich.split import split_document  # noqa: E402
from ctxr.tokens import count_tokens  # noqa: E402
from ctxr.types import Chunk, Document, DocumentKind, chunk_id_for  # noqa: E402
from tests.fixtures.documents import make_document  # noqa: E402

# CTXR_PROPERTY_EXAMPLES raises the count for a longer local hunt; the default keeps CI fast.
SETTINGS = settings(
    max_examples=int(os.environ.get("CTXR_PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

WORDS = [
    "alpha", "beta", "gamma", "delta", "index", "vector", "token", "chunk", "über", "naïve",
    "中文", "日本語", "😀", "résumé", "x", "of", "the", "and", "retrieval", "embedding",
]  # fmt: skip
ABBREVIATIONS = ["Dr.", "Mr.", "e.g.", "i.e.", "etc.", "U.S.", "approx.", "vs."]


def check_chunks(doc: Document, chunks: list[Chunk], max_tokens: int) -> list[Chunk]:
    """The invariants every split must keep; returns the over-budget chunks (unbreakable runs)."""
    oversized = []
    covered = bytearray(len(doc.text))
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert chunk.chunk_id == chunk_id_for(doc.doc_id, i)
        assert 0 <= chunk.start < chunk.end <= len(doc.text)
        assert doc.text[chunk.start : chunk.end] == chunk.text
        assert chunk.text.strip() == chunk.text != ""
        assert chunk.token_count == count_tokens(chunk.text)
        if chunk.token_count > max_tokens:
            # The single allowed excuse: a run without whitespace that has no word to cut at.
            assert not any(c.isspace() for c in chunk.text), chunk
            oversized.append(chunk)
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    for j in range(1, len(chunks)):
        assert chunks[j - 1].start < chunks[j].start
        assert chunks[j - 1].end < chunks[j].end
    missing = [i for i, ch in enumerate(doc.text) if not covered[i] and not ch.isspace()]
    assert missing == [], f"uncovered characters at {missing[:10]}"
    return oversized


def split_twice(doc: Document, max_tokens: int, overlap: int | None) -> list[Chunk]:
    first = split_document(doc, max_tokens=max_tokens, overlap_tokens=overlap)
    again = split_document(doc, max_tokens=max_tokens, overlap_tokens=overlap)
    assert first == again  # deterministic
    return first


# --------------------------------------------------------------------------------- Markdown

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


@st.composite
def markdown_docs(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """Markdown text plus the spans that must never be cut: whole fences and table rows."""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    out: list[str] = []
    pos = 0
    atomic: list[tuple[int, int]] = []

    def emit(piece: str, keep: bool = False) -> None:
        nonlocal pos
        if keep:
            atomic.append((pos, pos + len(piece)))
        out.append(piece)
        pos += len(piece)

    for _ in range(draw(st.integers(min_value=1, max_value=14))):
        block = draw(st.sampled_from(["heading", "para", "fence", "table", "list", "para"]))
        if block == "heading":
            emit("#" * draw(st.integers(1, 6)) + " " + draw(words))
        elif block == "para":
            sentences = draw(st.lists(words, min_size=1, max_size=6))
            emit(". ".join(s.capitalize() for s in sentences) + ".")
        elif block == "fence":
            mark = draw(st.sampled_from(["```", "~~~", "````"]))
            body_lines = draw(
                st.lists(
                    st.one_of(
                        words,
                        words.map(lambda w: "# " + w),  # looks like a heading, is not one
                        words.map(lambda w: "## " + w),
                        st.just("| not | a | table |"),
                        st.just(""),
                    ),
                    max_size=8,
                )
            )
            lang = draw(st.sampled_from(["", "python", "bash"]))
            emit(nl.join([mark + lang, *body_lines, mark]), keep=True)
        elif block == "table":
            cols = draw(st.integers(1, 4))
            header = "| " + " | ".join(draw(words) for _ in range(cols)) + " |"
            delim = "|" + "|".join("---" for _ in range(cols)) + "|"
            rows = [header, delim]
            for _ in range(draw(st.integers(0, 8))):
                rows.append("| " + " | ".join(draw(words) for _ in range(cols)) + " |")
            for k, row in enumerate(rows):
                emit(row, keep=True)
                if k < len(rows) - 1:
                    emit(nl)
        else:  # a list with the sentence that introduces it
            emit(draw(words).capitalize() + ":" + nl)
            items = draw(st.lists(words, min_size=1, max_size=5))
            bullet = draw(st.sampled_from(["- ", "* ", "1. "]))
            emit(nl.join(bullet + item for item in items))
        emit(nl + nl)
    return "".join(out), atomic


def crossing(chunks: list[Chunk], spans: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Chunk boundaries strictly inside a span: (boundary, span start, span end)."""
    bad: list[tuple[int, int, int]] = []
    for chunk in chunks:
        for b in (chunk.start, chunk.end):
            bad.extend((b, s, e) for s, e in spans if s < b < e)
    return bad


@SETTINGS
@given(
    md=markdown_docs(),
    max_tokens=st.integers(min_value=8, max_value=160),
    overlap=st.sampled_from([None, 0]),
)
def test_markdown_properties(
    md: tuple[str, list[tuple[int, int]]], max_tokens: int, overlap: int | None
) -> None:
    text, atomic = md
    doc = make_document(text, "markdown", doc_id="prop")
    chunks = split_twice(doc, max_tokens, overlap)
    check_chunks(doc, chunks, max_tokens)
    # Only spans that fit the budget on their own are owed to be kept whole.
    fitting = [(s, e) for s, e in atomic if count_tokens(text[s:e]) <= max_tokens]
    assert crossing(chunks, fitting) == []


@SETTINGS
@given(
    md=markdown_docs(),
    max_tokens=st.integers(min_value=8, max_value=120),
)
def test_html_kind_follows_markdown_properties(
    md: tuple[str, list[tuple[int, int]]], max_tokens: int
) -> None:
    """HTML is split as its extracted Markdown-like text; the same invariants hold."""
    doc = make_document(md[0], "html", doc_id="prop")
    check_chunks(doc, split_twice(doc, max_tokens, None), max_tokens)


# ------------------------------------------------------------------------------------- code

identifiers = st.sampled_from(["alpha", "beta", "gamma", "value", "größe", "item", "total"])


@st.composite
def python_statement(draw: st.DrawFn, indent: str) -> str:
    kind = draw(st.sampled_from(["assign", "call", "if", "for", "return", "comment"]))
    name = draw(identifiers)
    if kind == "assign":
        return f"{indent}{name} = {draw(st.integers(-999, 10**12))}"
    if kind == "call":
        args = ", ".join(draw(st.lists(identifiers, max_size=4)))
        return f"{indent}print({args!r}, {name!r})"
    if kind == "if":
        inner = indent + "    "
        return f"{indent}if {name}:\n{inner}{name} = {name!r} * 2\n{indent}else:\n{inner}pass"
    if kind == "for":
        return f"{indent}for {name} in range(3):\n{indent}    total = {name} + 1"
    if kind == "return":
        return f"{indent}{name} = [{', '.join(draw(st.lists(identifiers, max_size=30)))}]"
    return f"{indent}# {draw(words)}"


@st.composite
def python_function(draw: st.DrawFn, indent: str, name: str) -> str:
    deco = draw(st.sampled_from(["", f"{indent}@staticmethod\n", f"{indent}@cache\n"]))
    args = ", ".join(draw(st.lists(identifiers, max_size=3, unique=True)))
    body = [draw(python_statement(indent + "    ")) for _ in range(draw(st.integers(0, 12)))]
    body.append(f"{indent}    return None")  # a body of comments alone would not parse
    doc = draw(st.sampled_from(["", f'{indent}    """{draw(words)}."""\n']))
    return f"{deco}{indent}def {name}({args}):\n{doc}" + "\n".join(body)


@st.composite
def python_sources(draw: st.DrawFn) -> str:
    parts = ["import os\nfrom pathlib import Path"]
    for n in range(draw(st.integers(1, 8))):
        what = draw(st.sampled_from(["def", "class", "stmt"]))
        if what == "def":
            parts.append(draw(python_function("", f"func_{n}")))
        elif what == "class":
            methods = [
                draw(python_function("    ", f"method_{m}")) for m in range(draw(st.integers(1, 4)))
            ]
            parts.append(f"class Thing{n}(Base):\n" + "\n\n".join(methods))
        else:
            parts.append(draw(python_statement("")))
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    source = "\n\n\n".join(parts) + "\n"
    ast.parse(source)  # the generator only makes valid Python
    return source.replace("\n", nl)


@SETTINGS
@given(
    source=python_sources(),
    max_tokens=st.integers(min_value=8, max_value=200),
    overlap=st.sampled_from([None, 0, 2]),
)
def test_python_code_properties(source: str, max_tokens: int, overlap: int | None) -> None:
    doc = make_document(source, "code", doc_id="prop", language="python")
    check_chunks(doc, split_twice(doc, max_tokens, overlap), max_tokens)


@SETTINGS
@given(
    source=python_sources(),
    cuts=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 40)), max_size=6),
    language=st.sampled_from(["python", "typescript", "rust", "go", "java", "cpp", "c", "cobol"]),
    max_tokens=st.integers(min_value=4, max_value=120),
)
def test_mangled_code_never_crashes(
    source: str, cuts: list[tuple[int, int]], language: str, max_tokens: int
) -> None:
    """Python with random slices deleted, also fed to other grammars: no crash, invariants hold."""
    for at, length in cuts:
        at %= max(1, len(source))
        source = source[:at] + source[at + length :]
    doc = make_document(source, "code", doc_id="prop", language=language)
    check_chunks(doc, split_twice(doc, max_tokens, None), max_tokens)


# ------------------------------------------------------------------------------------ prose

sentence = st.builds(
    lambda ws, abbr, num, end: (" ".join([*ws[:1], abbr, *ws[1:]]) + f" {num}" + end).capitalize(),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=10),
    st.sampled_from(ABBREVIATIONS),
    st.sampled_from(["3.14", "0.5", "12.75", "v2.1", "1,000.25", "42"]),
    st.sampled_from([".", "!", "?", "."]),
)
unbroken = st.builds(
    lambda n, c: c * n,
    st.integers(min_value=20, max_value=900),
    st.sampled_from(["x", "ab", "中", "😀", "Zm9v", "/path"]),
)


@st.composite
def prose_docs(draw: st.DrawFn) -> str:
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    paragraphs = []
    for _ in range(draw(st.integers(1, 8))):
        items = draw(st.lists(st.one_of(sentence, sentence, sentence, unbroken), max_size=8))
        paragraphs.append(" ".join(items))
    return (nl + nl).join(paragraphs)


@SETTINGS
@given(
    text=prose_docs(),
    max_tokens=st.integers(min_value=4, max_value=200),
    overlap=st.sampled_from([None, 0, 1, 3]),
)
def test_prose_properties(text: str, max_tokens: int, overlap: int | None) -> None:
    doc = make_document(text, "text", doc_id="prop")
    if overlap is not None and overlap > max_tokens // 2:
        overlap = max_tokens // 2
    check_chunks(doc, split_twice(doc, max_tokens, overlap), max_tokens)


@SETTINGS
@given(
    sentences=st.lists(sentence, min_size=2, max_size=30),
    max_tokens=st.integers(min_value=48, max_value=160),
)
def test_prose_cuts_never_fall_on_abbreviations_or_decimals(
    sentences: list[str], max_tokens: int
) -> None:
    """When every sentence fits, chunks end at sentence ends, never after "Dr." or inside 3.14."""
    text = " ".join(sentences)
    doc = make_document(text, "text", doc_id="prop")
    overlap = max_tokens // 10
    assume(all(count_tokens(s) + 2 <= max_tokens - overlap for s in sentences))
    ends = set()
    pos = 0
    for s in sentences:
        pos = text.index(s, pos) + len(s)
        ends.add(pos)
    chunks = split_twice(doc, max_tokens, None)
    check_chunks(doc, chunks, max_tokens)
    assert [c.end for c in chunks if c.end not in ends] == []


@SETTINGS
@given(
    run=unbroken,
    max_tokens=st.integers(min_value=4, max_value=64),
    kind=st.sampled_from(["text", "markdown", "code"]),
)
def test_unbreakable_run_is_cut_or_reported(run: str, max_tokens: int, kind: DocumentKind) -> None:
    """A run without whitespace is the one thing that may not fit; it is cut at tokens."""
    doc = make_document(f"intro words {run} outro", kind, doc_id="prop")
    oversized = check_chunks(doc, split_twice(doc, max_tokens, None), max_tokens)
    assert oversized == []  # the splitter even cuts such runs at token boundaries
