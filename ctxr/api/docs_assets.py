"""Swagger UI at /docs and ReDoc at /redoc, from files the server serves itself.

FastAPI's own pages load Swagger UI and ReDoc from a CDN (jsdelivr) and ReDoc's fonts from
Google, so on a machine without the internet they stay blank. Here the script, stylesheet and
icon come from the `fastapi-offline` package (in the `server` extra; Swagger UI 5 and ReDoc 2,
2.7 MB unpacked; docs/explanation/dependencies.md), mounted at `ASSETS_PATH`, and the pages
name only paths on this server. The pages and their files sit behind the same guard as
everything else: where CTXR_API_TOKEN is set they need it, like /openapi.json.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
_MISSING = (
    "the API pages need the fastapi-offline package, which ships Swagger UI and ReDoc: "
    "pip install 'ctxr[server]'; the schema itself is at /openapi.json"
)


def _assets() -> Path | None:
    try:
        return Path(str(files("fastapi_offline") / "static"))
    except ModuleNotFoundError:
        return None


def add_docs_routes(app: FastAPI, openapi_url: str = "/openapi.json") -> None:
    """/docs and /redoc on `app`, with their files under `ASSETS_PATH` (the app is made with
    `docs_url=None, redoc_url=None`, so FastAPI's CDN pages are not there)."""
    assets = _assets()
    if assets is not None:
        app.mount(ASSETS_PATH, StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> Response:
        if assets is None:
            return PlainTextResponse(_MISSING, status_code=503)
        root = request.scope.get("root_path", "").rstrip("/")
        page: HTMLResponse = get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=None,
        )
        return page

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> Response:
        if assets is None:
            return PlainTextResponse(_MISSING, status_code=503)
        root = request.scope.get("root_path", "").rstrip("/")
        page: HTMLResponse = get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
        return page
