"""Files of a given shape and size, written for ctxr to load: generated prose (with Markdown
headings or as plain text), Markdown tables and nested ``<div>``s. Deterministic (fixed seeds).
"""

from __future__ import annotations

import random
from pathlib import Path

WORDS = " ".join(
    [
        "the of and a to in is that for it as was with be by on not this are or from at which but",
        "have an they were there one all we their lantern tide harbour ledger archive backup",
        "restore thumbnail queue migration lock schema server client request answer index search",
    ]
).split()


def prose(n_bytes: int, headings: bool, seed: int = 1) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        para = " ".join(rng.choice(WORDS) for _ in range(80)).capitalize() + "."
        if headings and len(parts) % 8 == 0:
            para = f"## Section {len(parts) // 8 + 1}\n\n{para}"
        parts.append(para)
        size += len(para) + 2
    return ("# Notes\n\n" if headings else "") + "\n\n".join(parts) + "\n"


def table(rows: int) -> str:
    rng = random.Random(2)
    body = "".join(f"| {i} | item{i} | {i * 3} | {rng.choice(WORDS)} {rng.choice(WORDS)} |\n"
                   for i in range(rows))  # fmt: skip
    return "# Stock\n\n| id | name | value | note |\n|---|---|---|---|\n" + body


def divs(depth: int) -> str:
    tail = "".join(f"<p>{p}</p>" for p in prose(20_000, False).split("\n\n"))
    deep = f"{'<div>' * depth}One sentence deep inside.{'</div>' * depth}"
    return f"<html><body>{deep}{tail}</body></html>"


def make(shape: str, size: float, folder: Path) -> Path:
    """`size`: rows for table, depth for divs, bytes for prose and text."""
    if shape == "table":
        path, text = folder / f"table-{int(size)}.md", table(int(size))
    elif shape == "divs":
        path, text = folder / f"divs-{int(size)}.html", divs(int(size))
    elif shape == "prose":
        path, text = folder / f"prose-{int(size)}.md", prose(int(size), True)
    else:
        path, text = folder / f"text-{int(size)}.txt", prose(int(size), False)
    path.write_text(text, encoding="utf-8")
    return path
