"""`ctxr`'s indexing against LlamaIndex's `IngestionPipeline`, side by side, with the retrieval
quality of both on the same judged queries.

The corpus: the 90 anthropic-codebase files, each named by its document's uuid. The two runs,
each in a fresh process that reports its own peak RSS, cold (new index, no embedding cache),
timed in turns (ctxr, llamaindex, ctxr, ...):

- ctxr: `build_index` with its defaults and outline contexts (no LLM), the embedded Qdrant
  shard (dense + BM25);
- LlamaIndex: `SimpleDirectoryReader` -> `IngestionPipeline([SentenceSplitter(chunk_size=200,
  chunk_overlap=20), MiniLM])` -> `QdrantVectorStore` on qdrant-client's local mode (on disk).
  The embedding is the same ONNX MiniLM (ctxr's `OnnxEmbedder`, batches of 8) behind a
  LlamaIndex `BaseEmbedding`, so both pay for the same model; 200 tokens because MiniLM reads
  256 word pieces and truncates the rest. Retrieval: the index's retriever, dense only (a
  hybrid LlamaIndex + Qdrant setup needs a sparse model from a hub: none can be had offline).

Quality: the set's 248 queries; a golden chunk is found by a hit of the same document that
overlaps it by at least half of the shorter span (`ctxr.eval.judging.spans_match`, `ctxr eval`'s
rule for its own chunks), the same rule for both. Printed: seconds per turn, the ratio of the
medians, chunks and chunks/s, peak RSS, Pass@5/10/20 (ctxr hybrid and dense, LlamaIndex dense),
and the load average. Needs `pip install llama-index-core llama-index-vector-stores-qdrant`.

Usage::

    python -m bench.peers.llamaindex_ingest [--turns 2] [--data ../shared/data/anthropic-codebase]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.checkout import data_dir
from bench.common.codebase import EXTENSIONS, guess_language
from bench.common.measure import load_line, ratio_table, run_child, say, turns
from bench.common.measure import parser as cli

CTXR, PEER = "ctxr", "llamaindex"
DEPTH = 20
KS = (5, 10, 20)
SPLIT_TOKENS, SPLIT_OVERLAP = 200, 20


def _queries(data: Path) -> list[str]:
    from ctxr.eval.datasets import load_anthropic_codebase

    return [q.text for q in load_anthropic_codebase(data).queries]


def run_ctxr(corpus: str, work: str, data: str) -> None:
    """The child for ctxr: index, then the judged queries; prints JSON to stdout."""
    from ctxr.config import load_settings
    from ctxr.pipeline.build import build_index
    from ctxr.retrieve.service import SearchService

    settings = load_settings(index_dir=Path(work) / "idx", cache_dir=Path(work) / "cache",
                             context="outline")  # fmt: skip
    started = time.perf_counter()
    report = build_index([corpus], settings)
    seconds = time.perf_counter() - started
    hits: dict[str, list[list[list[Any]]]] = {"hybrid": [], "dense": []}
    with SearchService(settings) as service:
        for query in _queries(Path(data)):
            for mode in hits:
                found = service.search(query, k=DEPTH, mode=mode)
                hits[mode].append([[Path(h.source).stem, h.start, h.end] for h in found])
    print(json.dumps({"seconds": seconds, "chunks": report.chunks_written, "hits": hits}))


def run_llamaindex(corpus: str, work: str, data: str) -> None:
    """The child for LlamaIndex: the same, through its ingestion pipeline."""
    from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    from ctxr.index.embed.onnx import OnnxEmbedder
    from ctxr.tokens import seed_tiktoken_cache

    seed_tiktoken_cache("cl100k_base")  # LlamaIndex's splitter counts with tiktoken, offline here
    model = OnnxEmbedder()

    class MiniLM(BaseEmbedding):  # type: ignore[misc]
        def _get_query_embedding(self, query: str) -> list[float]:
            return [float(x) for x in model.embed([query])[0]]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embeddings([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in model.embed(texts)]

    embed = MiniLM(embed_batch_size=64)
    store = QdrantVectorStore("peer", client=QdrantClient(path=str(Path(work) / "qdrant")))
    started = time.perf_counter()
    documents = SimpleDirectoryReader(corpus).load_data()
    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=SPLIT_TOKENS, chunk_overlap=SPLIT_OVERLAP),
                         embed],
        vector_store=store,
    )  # fmt: skip
    nodes = pipeline.run(documents=documents)
    seconds = time.perf_counter() - started
    retriever = VectorStoreIndex.from_vector_store(store, embed_model=embed).as_retriever(
        similarity_top_k=DEPTH
    )
    hits: list[list[list[Any]]] = []
    for query in _queries(Path(data)):
        found = retriever.retrieve(query)
        hits.append([[Path(n.node.metadata["file_name"]).stem, n.node.start_char_idx,
                      n.node.end_char_idx] for n in found])  # fmt: skip
    print(json.dumps({"seconds": seconds, "chunks": len(nodes), "hits": {"dense": hits}}))


def pass_at(hits: list[list[list[Any]]], data: Path) -> list[float]:
    """Pass@k for each k of `KS`: the mean share of each query's golden chunks found in its
    first k hits, by `spans_match`."""
    from ctxr.eval.datasets import load_anthropic_codebase
    from ctxr.eval.judging import spans_match

    dataset = load_anthropic_codebase(data)
    spans = {c.chunk_key: (c.doc_id, c.start, c.end) for d in dataset.documents for c in d.chunks}
    scores = {k: 0.0 for k in KS}
    for query, found in zip(dataset.queries, hits, strict=True):
        golden = [spans[key] for key in query.qrels]
        for k in KS:
            got = sum(
                any(doc == gd and s is not None and spans_match(gs, ge, s, e)
                    for doc, s, e in found[:k])
                for gd, gs, ge in golden
            )  # fmt: skip
            scores[k] += got / len(golden)
    return [round(100 * scores[k] / len(dataset.queries), 2) for k in KS]


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--data", type=Path, help="the anthropic-codebase folder")
    args = parser.parse_args(argv)
    data = args.data or data_dir("anthropic-codebase")
    say(load_line("at start"))
    rows = json.loads((data / "codebase_chunks.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        corpus.mkdir()
        for row in rows:  # named by uuid: a hit's file name is the golden chunks' document id
            suffix = EXTENSIONS.get(guess_language(row["content"]), ".txt")
            (corpus / f"{row['original_uuid']}{suffix}").write_text(row["content"])
        seconds: dict[str, list[float]] = {CTXR: [], PEER: []}
        peaks = dict.fromkeys(seconds, 0.0)
        last: dict[str, dict[str, Any]] = {}
        for number, (turn, name) in enumerate(turns(list(seconds), args.turns)):
            work = root / f"work-{number}"
            work.mkdir()
            function = "run_ctxr" if name == CTXR else "run_llamaindex"
            run = run_child(f"import sys; from bench.peers.llamaindex_ingest import {function}; "
                            f"{function}(*sys.argv[1:])", str(corpus), str(work), str(data))
            result = json.loads(run.stdout.strip().splitlines()[-1])
            seconds[name].append(result["seconds"])
            peaks[name] = max(peaks[name], run.peak_mib)
            last[name] = result
            say(f"turn {turn}: {name} indexed {result['chunks']:,} chunks in "
                f"{result['seconds']:.1f} s, peak RSS {run.peak_mib:.0f} MiB")  # fmt: skip
        for line in ratio_table(seconds, CTXR, digits=1):
            say(line)
        for name in (CTXR, PEER):
            median = statistics.median(seconds[name])
            chunks = last[name]["chunks"]
            say(f"{name}: {chunks:,} chunks, {chunks / median:.1f} chunks/s, "
                f"peak RSS {peaks[name]:.0f} MiB")  # fmt: skip
            for mode, hits in last[name]["hits"].items():
                p5, p10, p20 = pass_at(hits, data)
                say(f"  {mode}: Pass@5/10/20 {p5} / {p10} / {p20}")
    say(load_line("at end"))


if __name__ == "__main__":
    sys.exit(main())
