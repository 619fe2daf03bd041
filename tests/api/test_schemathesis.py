"""schemathesis (`--checks all`) against a real `ctxr serve`, with and without a bearer token.

schemathesis reads /openapi.json and sends what the schema allows and what it forbids: every
answer must be one the schema declares, with the body it declares; what the schema allows must
be accepted and what it forbids refused; with a token, a request without it must be refused.
The served schema is also checked with openapi-spec-validator. Both tools are in the
`api-test` extra (CI's own step); without them this module skips.

The server is `ctxr serve` on the session's examples index, in a subprocess
with no LLM provider in its environment: a configured provider would make the llm reranker
call the network. schemathesis runs with a fixed seed, and in a temporary directory, where it
keeps its own files.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.index import BuiltIndex
from tests.fixtures.serve_process import ctxr_serve

pytest.importorskip("schemathesis", reason="schemathesis is in the api-test extra")

# A real `ctxr serve` per token case, and schemathesis over the whole schema: a minute or more.
pytestmark = pytest.mark.slow

TOKEN = "schemathesis-token"
MAX_EXAMPLES = 15  # per operation and phase: ~20 s a run on two cores


def _command(name: str) -> list[str]:
    script = Path(sys.executable).with_name(name)
    assert script.exists(), f"{name} is not installed beside {sys.executable}"
    return [str(script)]


@pytest.fixture(params=[None, TOKEN], ids=["no-token", "token"])
def served(
    request: pytest.FixtureRequest, examples_index: BuiltIndex, tmp_path: Path
) -> Iterator[tuple[str, str | None]]:
    token: str | None = request.param
    env = {"CTXR_API_TOKEN": token} if token else {}
    with ctxr_serve(examples_index, tmp_path / "serve.log", env=env) as url:
        yield url, token


def test_schemathesis_finds_no_failure(served: tuple[str, str | None], tmp_path: Path) -> None:
    url, token = served
    headers = ["-H", f"Authorization: Bearer {token}"] if token else []
    run = subprocess.run(
        [*_command("schemathesis"), "run", f"{url}/openapi.json", "--checks", "all",
         "--max-examples", str(MAX_EXAMPLES), "--seed", "1", "--no-color", *headers],
        cwd=tmp_path, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-12_000:] + run.stderr[-2_000:]
    assert "failure" not in run.stdout.splitlines()[-1], run.stdout[-4_000:]


def test_the_served_schema_is_valid_openapi(served: tuple[str, str | None]) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    url, token = served
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    schema = httpx.get(f"{url}/openapi.json", headers=headers, timeout=30).json()
    validator.validate(schema)
    assert ("securitySchemes" in schema["components"]) is True  # /index/update needs a token
