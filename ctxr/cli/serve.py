"""`ctxr serve`: the HTTP search API (needs the `server` extra)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from ctxr.cli.options import allowed_host_option, index_option
from ctxr.config import load_settings
from ctxr.errors import ConfigError


@click.command("serve")
@index_option
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@allowed_host_option
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=True, path_type=Path),
    help="a folder `ctxr watch` may update besides those the index was built from "
    "(repeatable); default CTXR_API_UPDATE_ROOTS",
)
@click.option(
    "--trial",
    "trials",
    multiple=True,
    type=click.Path(path_type=Path),
    help="a `ctxr trial` report (trial.json or its --out folder) for the page's Trial view "
    "(repeatable); default CTXR_API_TRIALS",
)
def serve_command(
    index_dir: Path | None,
    host: str,
    port: int,
    allowed_hosts: tuple[str, ...],
    roots: tuple[Path, ...],
    trials: tuple[Path, ...],
) -> None:
    """Serve search over HTTP (POST /search, /health, /stats, /documents/ID, /docs)."""
    try:
        from ctxr.api.app import serve
    except ImportError as exc:
        raise ConfigError(
            f"`ctxr serve` needs FastAPI and uvicorn ({exc}); pip install 'ctxr[server]'"
        ) from exc
    settings = load_settings(
        index_dir=index_dir,
        api_allowed_hosts=allowed_hosts or None,
        api_update_roots=tuple(str(r) for r in roots) or None,
        api_trials=tuple(str(t) for t in trials) or None,
        flags={
            "api_allowed_hosts": "--allowed-host",
            "api_update_roots": "--root",
            "api_trials": "--trial",
        },
    )
    if host not in ("127.0.0.1", "localhost", "::1") and settings.api.api_token is None:
        logging.getLogger("ctxr").warning(
            f"serving on {host} without CTXR_API_TOKEN: anyone who can reach it can search"
        )
    serve(settings, host=host, port=port)
