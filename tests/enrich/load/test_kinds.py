"""Binaries and text that is not a document: skipped, counted on one line, included by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxr.cli import main
from ctxr.config import load_settings
from ctxr.enrich.load.kinds import (
    BINARY_REASON,
    DATA_DUMP_BYTES,
    non_document,
    skip_reason,
    summarize_skips,
)
from ctxr.errors import ConfigError
from ctxr.index.manifest import Manifest
from ctxr.pipeline.build import build_index
from tests.fakes.hash_embedder import HashEmbedder

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
SVG = (
    '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80">'
    + "".join(
        f'<rect x="{i}" y="{i}" width="10" height="10" style="fill:#3a7;stroke:#000"/>\n'
        for i in range(40)
    )
    + "</svg>\n"
)
MINIFIED_JS = "!function(e,t){" + ";".join(f"var a{i}=e[{i}]||t" for i in range(400)) + "}();\n"
LOCK = json.dumps(
    {"name": "site", "lockfileVersion": 3, "packages": {"node_modules/a": {"version": "1.0.0"}}}
)


def _corpus(root: Path) -> dict[str, Path]:
    files = {
        "guide": root / "guide.md",
        "tool": root / "tool.py",
        "logo": root / "img" / "logo.png",
        "icon": root / "img" / "icon.png",
        "diagram": root / "img" / "flow.drawio.svg",
        "chart": root / "img" / "chart.svg",
        "bundle": root / "static" / "app.js",
        "lock": root / "package-lock.json",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    files["guide"].write_text("# Guide\n\nHow to polish brass lanterns by hand.\n")
    files["tool"].write_text("def polish_lantern() -> None:\n    pass\n")
    files["logo"].write_bytes(PNG)
    files["icon"].write_bytes(PNG)
    files["diagram"].write_text(SVG)
    files["chart"].write_text(SVG)
    files["bundle"].write_text(MINIFIED_JS)  # minified, though not named *.min.js
    files["lock"].write_text(LOCK)
    return files


def test_a_corpus_of_svgs_pngs_minified_js_and_a_lock_file_indexes_only_the_documents(
    tmp_path: Path,
) -> None:
    files = _corpus(tmp_path / "corpus")
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")

    report = build_index([tmp_path / "corpus"], settings, embedder=HashEmbedder())

    assert report.failed == []
    assert report.documents_indexed == 2
    manifest = Manifest.load(tmp_path / "idx")
    assert set(manifest.documents) == {files["guide"].as_posix(), files["tool"].as_posix()}
    reasons = {s.path: s.reason for s in report.skipped}
    assert reasons == {
        files["logo"].as_posix(): BINARY_REASON,
        files["icon"].as_posix(): BINARY_REASON,
        files["diagram"].as_posix(): skip_reason("markup"),
        files["chart"].as_posix(): skip_reason("markup"),
        files["bundle"].as_posix(): skip_reason("minified"),
        files["lock"].as_posix(): skip_reason("lock"),
    }
    assert summarize_skips(reasons.values()) == (
        "skipped 6 paths: 2 binary, 2 markup without prose, 1 lock file, 1 minified code "
        "(to index those: --include lock,markup,minified or CTXR_INCLUDE=lock,markup,minified)"
    )


def test_cli_prints_one_skip_line_lists_with_verbose_and_dry_run_fails_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _corpus(tmp_path / "corpus")
    monkeypatch.setenv("CTXR_CACHE_DIR", str(tmp_path / "cache"))
    runner = CliRunner()
    args = ["index", str(tmp_path / "corpus"), "--index", str(tmp_path / "idx")]

    result = runner.invoke(main, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    skip_lines = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert skip_lines == [line for line in skip_lines if line.startswith("skipped 6 paths: ")]
    assert len(skip_lines) == 1
    assert "not indexed" not in result.stderr and "logo.png" not in result.stderr

    verbose = runner.invoke(main, [*args, "--verbose"], env={"COLUMNS": "200"})
    assert verbose.exit_code == 0, verbose.output
    assert f"skipped: {files['logo'].as_posix()}: {BINARY_REASON}" in verbose.stderr

    dry = runner.invoke(main, [*args, "--dry-run", "--rebuild"], env={"COLUMNS": "200"})
    assert dry.exit_code == 0, dry.output
    assert "(6 skipped, 0 failed to load)" in " ".join(dry.stdout.split())


def test_include_indexes_a_named_non_document(tmp_path: Path) -> None:
    files = _corpus(tmp_path / "corpus")
    settings = load_settings(
        index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", include="markup, lock"
    )
    report = build_index([tmp_path / "corpus"], settings, embedder=HashEmbedder())
    manifest = Manifest.load(tmp_path / "idx")
    assert files["chart"].as_posix() in manifest.documents
    assert files["lock"].as_posix() in manifest.documents
    assert files["bundle"].as_posix() not in manifest.documents
    assert report.documents_indexed == 5  # guide, tool, two SVGs, the lock file
    with pytest.raises(ConfigError, match=r"CTXR_INCLUDE.*unknown kind svg"):
        load_settings(include="svg")


PROSE = "A long paragraph of prose about lanterns. " * 30
TAGS = '<xs:element name="a" type="xs:string"/>' * 60
BIG = DATA_DUMP_BYTES


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("notes.xml", f"<doc><p>{PROSE}</p></doc>", None),
        ("schema.xsd", f"<xs:schema>{TAGS}</xs:schema>", "markup"),
        ("app.js", "function polish(lantern) {\n  return lantern.shine();\n}\n" * 40, None),
        ("site.min.css", "body{margin:0}\n", "minified"),
        ("Cargo.lock", "[[package]]\nname = \"serde\"\n", "lock"),
        ("poetry.lock", "[[package]]\nname = \"click\"\n", "lock"),
        ("yarn.lock", "lodash@^4:\n  version \"4.17.21\"\n", "lock"),
        ("small.csv", "a,b\n1,2\n", None),
        ("rows.csv", "id,value\n" + "1,2\n" * (BIG // 4 + 10), "data"),
        ("dump.json", "[" + ",".join(['{"id": 1, "v": 2}'] * (BIG // 16)) + "]", "data"),
        ("chat.json", '[{"role": "user", "content": "' + "hi " * (BIG // 3) + '"}]', None),
        ("photo.JPG", "not really", "binary"),
        ("font.woff2", "x", "binary"),
        ("clip.mp4", "x", "binary"),
        ("guide.md", "# Guide\n", None),
    ],
)  # fmt: skip
def test_non_document_by_name_and_content(
    tmp_path: Path, name: str, content: str, kind: str | None
) -> None:
    path = tmp_path / name
    path.write_text(content)
    assert non_document(path) == kind
    if kind not in (None, "binary"):
        assert non_document(path, include={kind}) is None  # named: loaded as text


def test_a_non_document_indexed_before_is_pruned_once_skipped(tmp_path: Path) -> None:
    files = _corpus(tmp_path / "corpus")
    options: dict[str, Any] = {"index_dir": tmp_path / "idx", "cache_dir": tmp_path / "cache"}
    with_svgs = load_settings(**options, include="markup")
    build_index([tmp_path / "corpus"], with_svgs, embedder=HashEmbedder())
    assert files["chart"].as_posix() in Manifest.load(tmp_path / "idx").documents

    report = build_index([tmp_path / "corpus"], load_settings(**options), embedder=HashEmbedder())

    assert report.documents_removed == 2  # the two SVGs, now skipped as markup
    manifest = Manifest.load(tmp_path / "idx")
    assert set(manifest.documents) == {files["guide"].as_posix(), files["tool"].as_posix()}
    assert report.documents_unchanged == 2
    fresh = load_settings(index_dir=tmp_path / "fresh", cache_dir=tmp_path / "cache")
    only_docs = build_index([tmp_path / "corpus"], fresh, embedder=HashEmbedder())
    assert report.points_total == only_docs.points_total  # the SVGs' points are gone too
