"""Showing an evaluation: a rich table, the same content as JSON, and a recall-against-k plot.

Published numbers sit beside ours where a comparable configuration exists, so a table is read
against an outside reference, not only against itself. They are quoted from the data sets'
READMEs (``shared/data/README.md``): Anthropic's contextual-retrieval guides (Pass@k in
percent, on *their* chunks; with ``--chunks ours`` they are a loose reference only) and the
BEIR/Anserini SciFact numbers (nDCG@10 and recall@100).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ctxr.errors import ConfigError
from ctxr.eval.runner import EvalResult, RowResult

Reference = dict[str, Any]

# Row name -> published configurations; metric values as fractions.
_ANTHROPIC: dict[str, list[Reference]] = {
    "dense:none": [
        {"label": "voyage-2, raw chunks", "pass@5": 0.8092, "pass@10": 0.8715, "pass@20": 0.9006},
    ],
    "bm25:none": [
        {"label": "plain BM25, raw chunks (approx.)", "pass@5": 0.74, "pass@10": 0.81,
         "pass@20": 0.86},
    ],
    "dense:outline": [
        {"label": "contextual emb. (claude-3-haiku)", "pass@5": 0.8637, "pass@10": 0.9281,
         "pass@20": 0.9378},
        {"label": "contextual emb. (haiku-4-5)", "pass@5": 0.8812, "pass@10": 0.9234,
         "pass@20": 0.9429},
    ],
    "hybrid:outline": [
        {"label": "+ contextual BM25 (claude-3-haiku)", "pass@5": 0.8643, "pass@10": 0.9321,
         "pass@20": 0.9499},
        {"label": "+ contextual BM25 (haiku-4-5)", "pass@5": 0.8886, "pass@10": 0.9231,
         "pass@20": 0.9523},
    ],
    "rerank:outline": [
        {"label": "contextual emb. + Cohere rerank (claude-3-haiku)", "pass@5": 0.9124,
         "pass@10": 0.9479, "pass@20": 0.9630},
        {"label": "contextual emb. + Cohere rerank (haiku-4-5)", "pass@5": 0.9215,
         "pass@10": 0.9526, "pass@20": 0.9745},
    ],
}  # fmt: skip
_SCIFACT_BM25 = [
    {"label": "Anserini BM25 flat", "ndcg@10": 0.6789, "recall@100": 0.9253},
    {"label": "Anserini BM25 multifield", "ndcg@10": 0.6647, "recall@100": 0.9076},
]
_SCIFACT_DENSE = [
    {"label": "bge-small-en-v1.5 dense", "ndcg@10": 0.7127, "recall@100": 0.945},
    {"label": "bge-base-en-v1.5 dense", "ndcg@10": 0.7408, "recall@100": 0.9667},
]
_SCIFACT: dict[str, list[Reference]] = {
    "bm25:none": _SCIFACT_BM25,
    "dense:none": _SCIFACT_DENSE,
    "dense:outline": _SCIFACT_DENSE,
}


def references(result: EvalResult, row: str) -> list[Reference]:
    """Published numbers comparable with ``row`` of ``result``; [] where there are none."""
    if result.kind == "anthropic-codebase":
        return _ANTHROPIC.get(row, [])
    if result.dataset == "scifact":
        return _SCIFACT.get(row, [])
    return []


def columns(result: EvalResult) -> list[str]:
    """The metrics a table shows: Pass@k for Anthropic's set, BEIR's trio for BEIR sets."""
    if result.kind == "anthropic-codebase":
        return [f"pass@{k}" for k in result.ks] + ["mrr@10"]
    return ["ndcg@10", *[f"recall@{k}" for k in result.ks], "mrr@10"]


def _fmt(value: float | None, percent: bool) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.2f}" if percent else f"{value:.4f}"


def _settings_line(row: RowResult) -> str:
    s = row.settings
    parts = [f"cand {s['candidates']}"]
    if s.get("fusion") == "rrf":
        parts.append(f"fusion rrf k {s['rrf_k']}")
    elif s.get("fusion"):
        parts.append(f"fusion {s['fusion']}")
    if s.get("analyzer"):
        parts.append(f"k1 {s['bm25_k1']:g} b {s['bm25_b']:g}")
    if s.get("mode") == "bm25-doc" or (s.get("doc_ranking") not in (None, "off") and
                                       s.get("doc_bm25_tokens")):  # fmt: skip
        landing = (f", weight {s['doc_bm25_weight']:g} on {s['doc_ranking']} chunk"
                   if s.get("doc_ranking") else "")  # fmt: skip
        parts.append(f"doc BM25 <= {s['doc_bm25_tokens']} tokens{landing}")
    return ", ".join(parts)


def _rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """Header and cells shared by the rich table and the Markdown table."""
    percent = result.kind == "anthropic-codebase"
    names = columns(result)
    ranked = [n for n in names if n != "mrr@10"]
    header = ["row", *names, "published (" + " / ".join(ranked) + ")", "settings"]
    body: list[list[str]] = []
    for row in result.rows:
        published = [
            f"{ref['label']}: " + " / ".join(_fmt(ref.get(n), percent) for n in ranked)
            for ref in references(result, row.name)
        ]
        if not row.available:
            body.append([row.name, *(["-"] * len(names)), "\n".join(published), row.note])
            continue
        cells = [_fmt(row.scores.get(n), percent) for n in names]
        body.append([row.name, *cells, "\n".join(published), _settings_line(row)])
    return header, body


def _title(result: EvalResult) -> str:
    return (
        f"ctxr eval {result.dataset} ({result.chunks} chunks): "
        f"{result.queries} queries, {result.documents} documents"
    )


def table(result: EvalResult) -> Table:
    header, body = _rows(result)
    t = Table(title=_title(result), show_lines=True)
    for i, name in enumerate(header):
        t.add_column(name, no_wrap=i == 0, justify="right" if 0 < i < len(header) - 2 else "left")
    for cells in body:
        t.add_row(*cells)
    return t


def to_markdown(result: EvalResult) -> str:
    """The same table as GitHub Markdown, for docs/explanation/evaluation.md."""
    header, body = _rows(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("\n", "<br>") for c in cells) + " |" for cells in body]
    return "\n".join(lines) + "\n"


def print_report(result: EvalResult, console: Console) -> None:
    console.print(table(result))
    for context, info in result.indexes.items():
        line = f"index ({context}): {info['points']} chunks"
        if info["chunks_written"]:
            line += f", {info['chunks_truncated_by_embedder']} cut to the embedder's input length"
        else:
            line += f", reused from {info['index_dir']}"
        console.print(line, highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def to_json(result: EvalResult) -> dict[str, Any]:
    body = asdict(result)
    for row in body["rows"]:
        row["published"] = references(result, row["name"])
    body["columns"] = columns(result)
    return body


def plot_recall(result: EvalResult, path: Path) -> Path:
    """Recall against k, one line per available row, written as PNG (or any matplotlib type)."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError(
            "--plot needs matplotlib, an optional extra: pip install 'ctxr[plot]'"
        ) from exc
    matplotlib.use("Agg")  # no display needed; must precede pyplot's import
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in result.rows:
        if row.available and row.curve:
            ax.plot(range(1, len(row.curve) + 1), row.curve, label=row.name)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("k (hits)" if result.kind == "anthropic-codebase" else "k (documents)")
    ax.set_ylabel("Pass@k" if result.kind == "anthropic-codebase" else "recall@k")
    ax.set_ylim(0, 1)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"{result.dataset} ({result.chunks} chunks)")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
