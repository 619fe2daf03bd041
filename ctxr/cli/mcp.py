"""`ctxr mcp`: the index's search as an MCP server for agents (needs the `mcp` extra)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from ctxr.cli.options import allowed_host_option, index_option
from ctxr.config import load_settings
from ctxr.errors import ConfigError

_LOCAL = ("127.0.0.1", "localhost", "::1")


def _host_port(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(
            f"{value!r} is not HOST:PORT, e.g. 127.0.0.1:8765", param_hint="--http"
        )
    return host.strip("[]"), int(port)


@click.command("mcp")
@index_option
@click.option(
    "--http", "http", metavar="HOST:PORT",
    help="serve the streamable HTTP transport at http://HOST:PORT/mcp (bearer CTXR_API_TOKEN) "
    "instead of stdio",
)  # fmt: skip
@allowed_host_option
def mcp_command(index_dir: Path | None, http: str | None, allowed_hosts: tuple[str, ...]) -> None:
    """Serve search to agents over MCP: tools search, get_document, get_passage; stdio by
    default (for Claude Desktop, Claude Code, IDEs)."""
    address = _host_port(http)
    try:
        from ctxr.api import mcp
    except ImportError as exc:
        raise ConfigError(f"`ctxr mcp` needs the MCP SDK ({exc}); pip install 'ctxr[mcp]'") from exc
    settings = load_settings(
        index_dir=index_dir,
        api_allowed_hosts=allowed_hosts or None,
        flags={"api_allowed_hosts": "--allowed-host"},
    )
    if address is None:
        mcp.serve_stdio(settings)
        return
    host, port = address
    if host not in _LOCAL and settings.api.api_token is None:
        logging.getLogger("ctxr").warning(
            f"serving MCP on {host} without CTXR_API_TOKEN: anyone who can reach it can search"
        )
    mcp.serve_http(settings, host, port)
