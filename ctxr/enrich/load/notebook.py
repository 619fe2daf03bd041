"""Jupyter notebooks (``.ipynb``, nbformat 4): markdown and code cells as Markdown, outputs dropped.

The notebook's JSON is read with the standard library (nbformat's schema adds nothing a reader
of cells needs). Markdown cells are kept as written, so their headings become the chunks'
heading trails; each code cell becomes a fenced block whose info string names the kernel's
language and the cell's number (```` ```python cell 4 ````), so a hit on code says which cell
it came from. Outputs (tracebacks, tables, base64 images) and raw cells are dropped: they are
results, not the document, and a single plot would outweigh the prose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ctxr.enrich.load.walk import display_path
from ctxr.errors import LoadError
from ctxr.types import Document, text_hash

_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_FENCE_RUN = re.compile(r"`{3,}")


def load_notebook(path: Path, raw: str) -> Document:
    """Render the notebook whose JSON is `raw`; raise a `LoadError` naming the file and the fix."""
    source = display_path(path)
    try:
        notebook = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LoadError(
            source, f"not valid notebook JSON (line {exc.lineno}); re-save it from Jupyter"
        ) from exc
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise LoadError(
            source,
            "no cell list (nbformat 4 expected); upgrade it: `jupyter nbconvert --to notebook "
            f"--nbformat 4 {source}`",
        )
    language = _language(notebook.get("metadata"))
    blocks = [
        block for number, cell in enumerate(cells, 1) if (block := _cell(cell, number, language))
    ]
    text = "\n\n".join(blocks) + "\n" if blocks else ""
    if not text.strip():
        raise LoadError(source, "a notebook with no markdown or code; nothing to index")
    heading = _H1.search(text)
    return Document(
        doc_id=source,
        source=source,
        text=text,
        kind="notebook",
        title=heading.group(1).strip() if heading else path.name,
        sha256=text_hash(text),
        language=language,
    )


def _cell(cell: Any, number: int, language: str) -> str | None:
    if not isinstance(cell, dict):
        return None
    body = cell.get("source", "")
    body = "".join(body) if isinstance(body, list) else str(body)
    if not body.strip():
        return None
    kind = cell.get("cell_type")
    if kind == "markdown":
        return body.strip("\n")
    if kind == "code":
        # A fence longer than any run of backticks in the code, so the code cannot close it.
        longest = max((len(run) for run in _FENCE_RUN.findall(body)), default=2)
        fence = "`" * max(3, longest + 1)
        return f"{fence}{language} cell {number}\n{body.rstrip()}\n{fence}"
    return None  # raw cells: nbconvert directives, LaTeX preambles


def _language(metadata: Any) -> str:
    if isinstance(metadata, dict):
        for key in ("language_info", "kernelspec"):
            entry = metadata.get(key)
            name = (
                entry.get("name" if key == "language_info" else "language")
                if isinstance(entry, dict)
                else None
            )
            if isinstance(name, str) and name.strip():
                return name.strip().lower()
    return "python"
