"""The page at `/`: a search box that shows why each passage was found, how a document was
split, and how the index was built.

A static shell (`ui/templates/page.html`) and its script, stylesheet and icon (`ui/static/`),
shipped in the package and served by the server itself: no CDN, no font service, no build
step, so it works offline. The shell and its files hold no data, so they are open like
`/health` (`PAGE_PATHS`): a browser cannot send a bearer header when it opens a page. The
data comes from the JSON API (`/search`, `/documents/{doc_id}`, `/highlight`, `/overview`,
`/health`), under the same guard and token rules as any client; where CTXR_API_TOKEN is set the
script asks for the token once, keeps it in the tab's sessionStorage and sends it as
`Authorization: Bearer` with each request.

Indexed text is shown as text, never as markup (the script builds nodes; it writes no HTML),
and the shell's Content-Security-Policy allows scripts, styles and requests from this server
only, so a document that holds markup cannot run in the page.
"""

from __future__ import annotations

from functools import cache
from html import escape
from importlib.resources import files
from pathlib import Path
from string import Template

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

UI = Path(str(files("ctxr.api") / "ui"))
STATIC = UI / "static"
STATIC_PATH = "/ui"
PAGE_PATHS = frozenset({"/", *(f"{STATIC_PATH}/{p.name}" for p in STATIC.iterdir())})

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _shell() -> Template:
    return Template((UI / "templates" / "page.html").read_text(encoding="utf-8"))


def add_page_routes(app: FastAPI) -> None:
    """`/` and the page's files under `STATIC_PATH` (open: see the module docstring)."""
    app.mount(STATIC_PATH, StaticFiles(directory=STATIC), name="page-files")

    @app.get("/", include_in_schema=False)
    async def page(request: Request) -> HTMLResponse:
        root = escape(request.scope.get("root_path", "").rstrip("/"))
        html = _shell().substitute(root=root, version=escape(app.version))
        return HTMLResponse(html, headers=_HEADERS)
