"""Splitting throughput: ctxr's structure-aware splitter against chonkie and langchain.

The same corpus goes through every splitter, with the same budget: 512 tokens counted with
tiktoken ``cl100k_base``, no overlap.

* ctxr: ``split_document(doc, max_tokens=512, overlap_tokens=0)`` with the right kind per file
  (``markdown``; ``code`` with its language; ``text``), i.e. the structure-aware path
  (headings, tree-sitter, prose recursion).
* chonkie: ``RecursiveChunker(tokenizer=<tiktoken cl100k_base>, chunk_size=512)`` with its
  default (prose) rules, and ``TokenChunker`` (fixed 512-token windows) as a floor.
* langchain: ``RecursiveCharacterTextSplitter.from_tiktoken_encoder(encoding_name="cl100k_base",
  chunk_size=512, chunk_overlap=0)`` (its plain recursive path, default separators).

Corpus (real text that ships with the workspace):

* code: the 90 source files of ``../shared/data/anthropic-codebase/codebase_chunks.json``
  (their ``content``); the JSON has no file names, so each file's language is the grammar
  that parses it with the fewest error bytes (`bench.common.codebase.guess_language`).
* prose: SciFact abstracts (``../shared/data/scifact/corpus.jsonl.gz``), title + abstract,
  grouped ``--abstracts-per-doc`` to a document with blank lines between them (a lone abstract
  is under the budget and would not be split at all), up to ``--prose-mb`` MB.
* markdown: the repository's own README.md, docs/*.md and examples/docs/*.md, repeated as
  separate documents until ``--markdown-mb`` MB (the set is only ~0.1 MB).

Each splitter runs once to warm up (imports, grammars, tokenizer caches), then ``--runs`` times
in turns with the others (one pass of each per round, so that a slow spell of a shared machine
hits all alike); the best run counts. chonkie's RecursiveChunker memoises token counts across
calls; its cache is cleared before each document so that repeated runs and repeated files are
not counted once.
MB is 10^6 UTF-8 bytes. Budget compliance: every chunk's text is re-counted with cl100k_base
(special tokens as text) and those over 512 are reported. When ctxr is slower than a peer's
recursive splitter on a kind, one ctxr pass over that kind is run under cProfile and its top
entries are printed (cProfile inflates many small calls; py-spy gives truer shares).

Reference rows that are not splitters: "floor: tiktoken encodes each text once" (the least
any splitter with exact token counts must do) and, for code, "floor: tree-sitter parse +
tiktoken once" (the least a syntax-aware one must do). On prose, ctxr also runs with its
default 10% overlap, as a user gets it.

Usage (the peers are benchmark-only: ``pip install -e '.[bench]'`` or
``pip install chonkie langchain-text-splitters``)::

    python -m bench.peers.split_compare [--runs 3] [--prose-mb 3] [--markdown-mb 3]
                                  [--kinds code,prose,markdown] [--no-profile]
"""

from __future__ import annotations

import cProfile
import gzip
import io
import json
import os
import platform
import pstats
from collections import Counter
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

import tiktoken

from bench.common.checkout import REPO, data_dir
from bench.common.codebase import documents, guess_language
from bench.common.measure import Span, load_line, say, turns
from bench.common.measure import parser as cli
from ctxr.enrich.split import split_document
from ctxr.enrich.split.code_languages import parser_for
from ctxr.tokens import get_encoding  # (seeds tiktoken's cache offline)
from ctxr.types import Document, text_hash

BUDGET = 512
ENCODING = "cl100k_base"


def _doc(i: int, source: str, text: str, kind: str, language: str | None = None) -> Document:
    return Document(
        doc_id=f"{kind}-{i}", source=source, text=text, kind=kind,  # type: ignore[arg-type]
        title=source, sha256=text_hash(text), language=language,
    )  # fmt: skip


def load_code() -> list[Document]:
    return [
        _doc(i, row["doc_id"], row["content"], "code", guess_language(row["content"]))
        for i, row in enumerate(documents())
    ]


def load_prose(max_mb: float, per_doc: int) -> list[Document]:
    docs: list[Document] = []
    group: list[str] = []
    size = 0
    with gzip.open(data_dir("scifact") / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            text = f"{row.get('title', '')}\n\n{row.get('text', '')}".strip()
            group.append(text)
            size += len(text.encode()) + 2
            if len(group) == per_doc:
                docs.append(_doc(len(docs), f"scifact-{len(docs)}", "\n\n".join(group), "text"))
                group = []
            if size >= max_mb * 1e6:
                break
    if group:
        docs.append(_doc(len(docs), f"scifact-{len(docs)}", "\n\n".join(group), "text"))
    return docs


def load_markdown(max_mb: float) -> tuple[list[Document], int, float]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             *sorted((REPO / "examples" / "docs").glob("*.md"))]  # fmt: skip
    texts = [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in files]
    once = sum(len(t.encode()) for _, t in texts) / 1e6
    docs: list[Document] = []
    size = 0.0
    while size < max_mb * 1e6:
        for source, text in texts:
            docs.append(_doc(len(docs), source, text, "markdown"))
            size += len(text.encode())
    return docs, len(files), once


Splitter = Callable[[list[Document]], list[str]]


def make_splitters() -> dict[str, Splitter]:
    from chonkie import RecursiveChunker, TokenChunker
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    enc = get_encoding(ENCODING)  # the same Encoding object for every splitter
    chonkie_rec = RecursiveChunker(tokenizer=enc, chunk_size=BUDGET)  # type: ignore[arg-type]
    clear_count_cache = getattr(RecursiveChunker._estimate_token_count, "cache_clear", lambda: None)
    chonkie_tok = TokenChunker(tokenizer=enc, chunk_size=BUDGET, chunk_overlap=0)  # type: ignore[arg-type]
    lc = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name=ENCODING, chunk_size=BUDGET, chunk_overlap=0
    )

    def ctxr(docs: list[Document]) -> list[str]:
        out: list[str] = []
        for d in docs:
            out.extend(c.text for c in split_document(d, max_tokens=BUDGET, overlap_tokens=0))
        return out

    def chonkie_recursive(docs: list[Document]) -> list[str]:
        out: list[str] = []
        for d in docs:
            # RecursiveChunker memoises token counts per text in a class-wide lru_cache(4096):
            # kept across documents and runs, the repeated runs (and the repeated Markdown
            # files) would be counted once. Each document starts cold, as a new one would.
            clear_count_cache()
            out.extend(c.text for c in chonkie_rec.chunk(d.text))
        return out

    def chonkie_token(docs: list[Document]) -> list[str]:
        return [c.text for d in docs for c in chonkie_tok.chunk(d.text)]

    def langchain_recursive(docs: list[Document]) -> list[str]:
        return [t for d in docs for t in lc.split_text(d.text)]

    return {
        "ctxr (structure-aware)": ctxr,
        "chonkie RecursiveChunker": chonkie_recursive,
        "langchain RecursiveCharacter": langchain_recursive,
        "chonkie TokenChunker": chonkie_token,
    }


RECURSIVE_PEERS = ("chonkie RecursiveChunker", "langchain RecursiveCharacter")


def make_floors(kind: str) -> dict[str, Splitter]:
    """What any exact splitter of this kind must at least do, timed alone (no chunks made).

    Every chunk's token count is exact, so each character is encoded at least once; a
    syntax-aware code splitter also parses each file once. Rows, not splitters: they show
    how much of ctxr's time is unavoidable work and how much is its own."""
    enc = get_encoding(ENCODING)

    def encode_once(docs: list[Document]) -> list[str]:
        for d in docs:
            enc.encode_to_numpy(d.text, disallowed_special=())
        return []

    floors = {"floor: tiktoken encodes each text once": encode_once}
    if kind == "code":

        def parse_and_encode(docs: list[Document]) -> list[str]:
            for d in docs:
                parser = parser_for(d.language or "")
                if parser is not None:
                    parser.parse(d.text.encode("utf-8"))
                enc.encode_to_numpy(d.text, disallowed_special=())
            return []

        floors["floor: tree-sitter parse + tiktoken once"] = parse_and_encode
    return floors


def ctxr_default_overlap(docs: list[Document]) -> list[str]:
    """ctxr as a user gets it on prose: the default overlap (10% of the budget)."""
    return [c.text for d in docs for c in split_document(d, max_tokens=BUDGET)]


def measure(
    fns: dict[str, Splitter], docs: list[Document], runs: int
) -> dict[str, tuple[float, list[str]]]:
    """Best time of ``runs`` passes per splitter, the passes taken in turns (one pass of each
    splitter per round) so that a slow spell of a shared machine hits them all alike."""
    chunks = {name: fn(docs) for name, fn in fns.items()}  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _, name in turns(list(fns), runs):
        with Span() as span:
            chunks[name] = fns[name](docs)
        best[name] = min(best[name], span.seconds)
    return {name: (best[name], chunks[name]) for name in fns}


def over_budget(enc: tiktoken.Encoding, texts: list[str]) -> tuple[int, int]:
    counts = [len(t) for t in enc.encode_batch(texts, disallowed_special=(), num_threads=1)]
    return sum(n > BUDGET for n in counts), max(counts, default=0)


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:  # ctxr run from a checkout that is not installed
        return "(checkout)"


def profile_ctxr(fn: Splitter, docs: list[Document], top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn(docs)
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def main() -> None:
    ap = cli(__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prose-mb", type=float, default=3.0)
    ap.add_argument("--markdown-mb", type=float, default=3.0)
    ap.add_argument("--abstracts-per-doc", type=int, default=50)
    ap.add_argument("--profile-top", type=int, default=15)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--kinds", default="code,prose,markdown", help="comma-separated subset")
    args = ap.parse_args()

    md_docs, md_files, md_once = load_markdown(args.markdown_mb)
    loaders: dict[str, Callable[[], list[Document]]] = {
        "code": load_code,
        "prose": lambda: load_prose(args.prose_mb, args.abstracts_per_doc),
        "markdown": lambda: md_docs,
    }
    corpora = {kind: loaders[kind]() for kind in args.kinds.split(",")}
    enc = get_encoding(ENCODING)
    splitters = make_splitters()

    say(f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.platform()})")  # fmt: skip
    say(load_line("at start"))
    print("versions: " + ", ".join(
        f"{p} {_version(p)}" for p in ("ctxr", "chonkie", "chonkie-core",
                                      "langchain-text-splitters", "tiktoken")))  # fmt: skip
    if "code" in corpora:
        langs = Counter(d.language for d in corpora["code"])
        print(f"code languages (guessed): {dict(langs.most_common())}")
    print(f"markdown: {md_files} files, {md_once:.3f} MB once, repeated to "
          f"{len(md_docs)} documents")  # fmt: skip

    results: dict[str, dict[str, tuple[float, int, int, int]]] = {}
    for kind, docs in corpora.items():
        mb = sum(len(d.text.encode()) for d in docs) / 1e6
        print(f"\n## {kind}: {len(docs)} documents, {mb:.2f} MB")
        results[kind] = {}
        extra: dict[str, Splitter] = {}
        if kind == "prose":
            extra["ctxr, default 10% overlap"] = ctxr_default_overlap
        timed = measure({**splitters, **extra, **make_floors(kind)}, docs, args.runs)
        for name, (secs, chunks) in timed.items():
            over, worst = over_budget(enc, chunks)
            results[kind][name] = (mb / secs, len(chunks), over, worst)
            print(f"  {name:30s} {mb / secs:8.3f} MB/s  {secs:7.3f} s  {len(chunks):6d} chunks"
                  f"  {over:5d} over {BUDGET} (max {worst})", flush=True)  # fmt: skip

    base = "ctxr (structure-aware)"
    print("\n| kind | splitter | MB/s | ctxr/peer | chunks | chunks > 512 tok (max) |")
    print("|---|---|---:|---:|---:|---:|")
    for kind, rows in results.items():
        ctxr_rate = rows[base][0]
        for name, (rate, n, over, worst) in rows.items():
            ratio = "-" if name.startswith("ctxr") else f"{ctxr_rate / rate:.2f}x"
            counts = f"{n} | {over} ({worst})" if n else "- | -"
            print(f"| {kind} | {name} | {rate:.3f} | {ratio} | {counts} |")

    for kind, rows in results.items():
        slower = [p for p in RECURSIVE_PEERS if rows[base][0] < rows[p][0]]
        if slower and not args.no_profile:
            print(f"\n## ctxr slower than {', '.join(slower)} on {kind}: cProfile of one pass")
            print(profile_ctxr(splitters[base], corpora[kind], args.profile_top))
    say(load_line("at end"))


if __name__ == "__main__":
    main()
