"""The syntax-aware code splitter: symbol paths, prefixes, statement splits, offsets."""

from __future__ import annotations

import itertools
import logging
import random
import re

import pytest

from ctxr.enrich.split import split_document
from ctxr.enrich.split.code_languages import SUPPORTED, parser_for
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document
from tests.fixtures.chunks import check_invariants, split_checked
from tests.fixtures.documents import make_document
from tests.fixtures.paths import EXAMPLES, ROOT

PYTHON = '''"""Caché helpers — überall."""

import os
from pathlib import Path


class ThumbnailCache:
    """Größen-begrenzter Cache."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.größe = 0

    # Evicts the oldest entries first.
    @staticmethod
    def evict(limit: int) -> int:
        """Drop entries until under ``limit``."""
        return limit - 1


def größe_lesen(path: Path) -> int:
    return os.stat(path).st_size
'''

JAVASCRIPT = """import fs from "fs";
import { join } from "path";

/** A cache of thumbnails — naïve. */
export class ThumbnailCache {
  constructor(root) {
    this.root = root;
  }

  evict(limit) {
    return fs.readdirSync(this.root).slice(0, limit);
  }
}

export const größe = (p) => fs.statSync(join("/", p)).size;

function helper(x) {
  return x * 2;
}
"""

TYPESCRIPT = """import { readFileSync } from "fs";

interface Entry {
  path: string;
  size: number;
}

export class ThumbnailCache {
  private entries: Entry[] = [];

  evict(limit: number): Entry[] {
    return this.entries.slice(0, limit);
  }

  add(entry: Entry): void {
    this.entries.push(entry);
  }
}

export function load(p: string): string {
  return readFileSync(p, "utf8"); // „quoted“
}
"""

JAVA = """package lumen.cache;

import java.util.List;
import java.util.ArrayList;

/** Größen-begrenzter Cache. */
public class ThumbnailCache {
    private final List<String> entries = new ArrayList<>();

    public ThumbnailCache() {}

    @Override
    public String toString() {
        return "ThumbnailCache(" + entries.size() + ")";
    }

    public int evict(int limit) {
        return Math.max(0, entries.size() - limit);
    }
}
"""

RUST = """use std::collections::HashMap;
use std::path::PathBuf;

/// A cache — größe in bytes.
#[derive(Debug, Default)]
pub struct ThumbnailCache {
    root: PathBuf,
    sizes: HashMap<String, u64>,
}

impl ThumbnailCache {
    pub fn new(root: PathBuf) -> Self {
        Self { root, sizes: HashMap::new() }
    }

    pub fn evict(&mut self, limit: u64) -> u64 {
        self.sizes.retain(|_, s| *s <= limit);
        limit
    }
}

fn helper(x: u64) -> u64 {
    x * 2
}
"""

GO = """package cache

import (
	"fmt"
	"os"
)

// ThumbnailCache holds thumbnails — größe capped.
type ThumbnailCache struct {
	root string
	used int64
}

// Evict drops old entries.
func (c *ThumbnailCache) Evict(limit int64) int64 {
	fmt.Println("evict", c.root)
	return c.used - limit
}

func helper() error {
	_, err := os.Stat("/")
	return err
}
"""

C = """#include <stdio.h>
#include <stdlib.h>

/* Größe of a cache entry. */
struct entry {
    int size;       /* bytes on disk */
    long mtime;     /* last modification, seconds */
    long atime;     /* last served, seconds */
    unsigned flags; /* pinned, stale, ... */
    char *path;     /* relative to the cache root */
};

int evict(struct entry *e, int limit) {
    printf("evict %d\\n", limit);
    return e->size - limit;
}

static int helper(void) { return 2; }
"""

CPP = """#include <string>
#include <vector>

namespace lumen {

// A cache — größe capped.
class ThumbnailCache {
 public:
  explicit ThumbnailCache(std::string root) : root_(root) {}
  int evict(int limit) {
    return static_cast<int>(entries_.size()) - limit;
  }

 private:
  std::string root_;
  std::vector<std::string> entries_;
};

}  // namespace lumen

int helper(int x) { return x * 2; }
"""

# language -> (source name, text, the class whose member chunk we inspect, that member)
SAMPLES = {
    "python": ("cache.py", PYTHON, "ThumbnailCache", "evict"),
    "javascript": ("cache.js", JAVASCRIPT, "ThumbnailCache", "evict"),
    "typescript": ("cache.ts", TYPESCRIPT, "ThumbnailCache", "add"),
    "java": ("ThumbnailCache.java", JAVA, "ThumbnailCache", "evict"),
    "rust": ("cache.rs", RUST, "ThumbnailCache", "evict"),
    "go": ("cache.go", GO, "ThumbnailCache", "Evict"),
    "c": ("cache.c", C, "entry", None),
    "cpp": ("cache.cpp", CPP, "ThumbnailCache", "evict"),
}
IMPORT_LINE = {
    "python": "import os",
    "javascript": 'import fs from "fs";',
    "typescript": 'import { readFileSync } from "fs";',
    "java": "import java.util.List;",
    "rust": "use std::collections::HashMap;",
    "go": '"fmt"',
    "c": "#include <stdio.h>",
    "cpp": "#include <string>",
}


def make_code(text: str, language: str, source: str) -> Document:
    return make_document(text, "code", doc_id=source, source=source, language=language)


def _split(language: str, max_tokens: int) -> tuple[Document, list[Chunk]]:
    source, text, _, _ = SAMPLES[language]
    doc = make_code(text, language, source)
    chunks = split_checked(doc, max_tokens)
    return doc, chunks


def test_every_language_has_a_sample_and_a_grammar() -> None:
    assert set(SAMPLES) == SUPPORTED
    for language in (*SUPPORTED, "tsx"):
        assert parser_for(language) is not None


@pytest.mark.parametrize("language", sorted(SAMPLES))
@pytest.mark.parametrize("max_tokens", [24, 40, 64, 512])
def test_invariants_and_no_overlap(language: str, max_tokens: int) -> None:
    _, chunks = _split(language, max_tokens)
    for prev, cur in itertools.pairwise(chunks):
        assert prev.end <= cur.start  # zero overlap by default
    assert all(c.heading_path == () or all(c.heading_path) for c in chunks)


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_member_chunk_has_symbol_path_and_prefix(language: str) -> None:
    _, _, owner, member = SAMPLES[language]
    _, chunks = _split(language, 40)
    path = (owner, member) if member else (owner,)  # a C struct's fields have no names here
    if language == "cpp":
        path = ("lumen", *path)
    imports = IMPORT_LINE[language]
    hits = [c for c in chunks if c.heading_path == path and imports not in c.text]
    assert hits, [(c.heading_path, c.text[:30]) for c in chunks]
    chunk = hits[0]
    assert chunk.prefix and chunk.prefix not in chunk.text
    if language != "go":  # a Go method is top level: its receiver names the type instead
        assert owner in chunk.prefix.split("\n\n")[-1]  # the enclosing signature, last
    # An import is repeated only for a chunk that uses a name it brings in.
    used = set(re.findall(r"\w+", chunk.text))
    for line in chunk.prefix.split("\n\n")[0].splitlines():
        if line.strip() not in ("import (", ")") and line.startswith(
            ("import", "use ", "#include", '"')
        ):
            assert used & set(re.findall(r"\w+", line)), (line, chunk.text)


def test_prefix_holds_only_the_imports_the_chunk_uses() -> None:
    text = (
        "import os\nimport json\nfrom pathlib import Path\n\n\nclass Store:\n"
        + "".join(
            f"    def read_{i}(self, name: str) -> str:\n"
            f"        return os.path.join(str(self.root), name, '{i}' * {i})\n\n"
            for i in range(12)
        )
        + "    def dump(self, value: dict[str, int]) -> str:\n"
        + "        return json.dumps(value, indent=2, sort_keys=True)\n"
    )
    doc = make_code(text, "python", "store.py")
    chunks = split_checked(doc, 64)
    members = [c for c in chunks if "import os" not in c.text]
    assert members
    for chunk in members:
        assert chunk.prefix.endswith("class Store:") or "class Store:" in chunk.text
        assert ("import os" in chunk.prefix) == ("os." in chunk.text)
        assert ("import json" in chunk.prefix) == ("json." in chunk.text)
        assert "pathlib" not in chunk.prefix  # no chunk uses Path


def test_prefix_share_is_bounded() -> None:
    text = _long_function()
    doc = make_code(text, "python", "engine.py")
    for budget in (64, 200):
        for chunk in split_document(doc, max_tokens=budget):
            assert count_tokens(chunk.prefix) <= max(16, budget // 16)


def test_whole_small_file_is_one_chunk_without_prefix() -> None:
    doc, chunks = _split("python", 512)
    assert len(chunks) == 1 and chunks[0].text == doc.text.strip()
    assert chunks[0].prefix == ""


def test_python_decorator_and_comment_stay_with_their_def() -> None:
    _, chunks = _split("python", 40)
    (evict,) = [c for c in chunks if c.heading_path == ("ThumbnailCache", "evict")]
    assert evict.text.startswith("# Evicts the oldest entries first.\n    @staticmethod\n")
    assert '"""Drop entries' in evict.text
    assert evict.prefix.endswith("class ThumbnailCache:")
    (free,) = [c for c in chunks if c.heading_path == ("größe_lesen",)]
    assert "import os" in free.prefix


def test_non_ascii_offsets_map_bytes_to_characters() -> None:
    for language in SAMPLES:
        doc, chunks = _split(language, 40)
        assert any(not c.text.isascii() for c in chunks), language
        for chunk in chunks:  # every chunk starts and ends on a token of the source
            assert doc.text[chunk.start : chunk.end] == chunk.text
            assert not doc.text[chunk.start].isspace()
    _, chunks = _split("python", 40)
    assert ("größe_lesen",) in {c.heading_path for c in chunks}
    assert any(c.text.startswith("def größe_lesen") for c in chunks)


def test_rust_attributes_and_doc_comment_stay_with_the_struct() -> None:
    _, chunks = _split("rust", 40)
    (struct,) = [c for c in chunks if c.text.startswith("/// A cache")]
    assert "#[derive(Debug, Default)]\npub struct ThumbnailCache" in struct.text
    (new,) = [c for c in chunks if "pub fn new" in c.text]
    assert new.heading_path == ("ThumbnailCache",)  # it also holds the impl line
    assert new.prefix.startswith("use std::")  # the imports it uses, within the prefix share
    (evict,) = [c for c in chunks if c.heading_path == ("ThumbnailCache", "evict")]
    assert evict.prefix.endswith("impl ThumbnailCache {")


def test_cpp_namespace_class_and_go_receivers() -> None:
    _, chunks = _split("cpp", 40)
    assert ("lumen", "ThumbnailCache", "evict") in {c.heading_path for c in chunks}
    _, chunks = _split("go", 40)
    (evict,) = [c for c in chunks if c.heading_path == ("ThumbnailCache", "Evict")]
    assert evict.text.startswith("// Evict drops old entries.\nfunc (c *ThumbnailCache)")


def _long_function() -> str:
    body = "".join(
        f"    value_{i} = compute(value_{i - 1}, {i})  # step {i}\n" for i in range(1, 60)
    )
    return (
        "import math\n\n\nclass Engine:\n    def run(self, value_0: int) -> int:\n"
        '        """Run every step."""\n'
        + body.replace("    ", "        ")
        + "        return value_59\n"
    )


def test_oversized_method_splits_at_statements() -> None:
    text = _long_function()
    doc = make_code(text, "python", "engine.py")
    chunks = split_checked(doc, 64)
    assert len(chunks) > 3
    assert chunks[0].heading_path == ("Engine",)  # it holds the class line and the def line
    assert all(c.heading_path == ("Engine", "run") for c in chunks[1:])
    for chunk in chunks[1:]:
        assert chunk.text.startswith("value_") or chunk.text.startswith("return")
        assert chunk.text.endswith(")") or chunk.text.endswith("value_59") or "# step" in chunk.text
        assert "import math" not in chunk.prefix  # the steps do not use it
        assert chunk.prefix.endswith("def run(self, value_0: int) -> int:")
    # Each statement line is whole: a cut falls only between statements.
    for chunk in chunks[1:]:
        for line in chunk.text.splitlines():
            assert line.strip().startswith(("value_", "return"))


def test_oversized_statement_falls_back_to_lines() -> None:
    items = ", ".join(f'"k{i}": {i}' for i in range(200))
    text = f"def table() -> dict[str, int]:\n    return {{{items}}}\n"
    doc = make_code(text, "python", "table.py")
    chunks = split_checked(doc, 48)
    assert all(c.heading_path == ("table",) for c in chunks)


def test_overlap_when_asked() -> None:
    doc = make_code(_long_function(), "python", "engine.py")
    chunks = split_checked(doc, 64, 8)
    assert any(prev.end > cur.start for prev, cur in itertools.pairwise(chunks))


def test_deterministic() -> None:
    for language in SAMPLES:
        assert _split(language, 40)[1] == _split(language, 40)[1]


def test_tsx_file_uses_the_tsx_grammar() -> None:
    text = (
        'import React from "react";\n\nexport function Thumb({ src }: { src: string }) {\n'
        '  return <img src={src} alt="größe" />;\n}\n'
    )
    doc = make_code(text, "typescript", "thumb.tsx")
    chunks = split_checked(doc, 24)
    assert ("Thumb",) in {c.heading_path for c in chunks}


def test_unknown_language_and_missing_grammar_fall_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    text = "def f():\n    return 1\n\n\ndef g():\n    return 2\n" * 20
    ruby = make_code(text, "ruby", "x.rb")
    split_checked(ruby, 32)
    from ctxr.enrich.split import code_languages

    parser_for.cache_clear()
    monkeypatch.setitem(code_languages._GRAMMARS, "python", ("no_such_grammar_module", "x"))
    try:
        with caplog.at_level(logging.WARNING):
            doc = make_code(text, "python", "x.py")
            chunks = split_document(doc, max_tokens=32)
        check_invariants(doc, chunks, 32)
        assert all(c.heading_path == () for c in chunks)
        assert "grammar for python unavailable" in caplog.text
    finally:
        parser_for.cache_clear()


def test_examples_thumbnails_splits_with_symbol_paths() -> None:
    path = EXAMPLES / "lumen" / "thumbnails.py"
    text = path.read_text(encoding="utf-8")
    doc = make_code(text, "python", "examples/lumen/thumbnails.py")
    chunks = split_checked(doc, 128)
    paths = {c.heading_path for c in chunks}
    assert ("ThumbnailCache", "_evict_until_under_limit") in paths
    assert ("render",) in paths and ("parse_size",) in paths
    (evict,) = [
        c for c in chunks if c.heading_path == ("ThumbnailCache", "_evict_until_under_limit")
    ]
    assert evict.prefix.endswith("class ThumbnailCache:")


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_invariants_hold_for_mangled_sources(language: str) -> None:
    """Shuffled lines and cut-off files parse with ERROR nodes; every invariant still holds."""
    source, text, _, _ = SAMPLES[language]
    rng = random.Random(f"code-{language}")
    lines = text.splitlines(keepends=True)
    for trial in range(12):
        picked = [rng.choice(lines) for _ in range(rng.randint(1, 3 * len(lines)))]
        if trial % 3 == 0:
            picked.insert(
                rng.randint(0, len(picked)), "  ünïcödé ✓ 😀 " * rng.randint(1, 30) + "\n"
            )
        mangled = "".join(picked)[: rng.randint(1, 4000)]
        doc = make_code(mangled, language, source)
        max_tokens = rng.choice([4, 8, 16, 48, 200])
        split_checked(doc, max_tokens)


def test_the_projects_own_sources_split_cleanly() -> None:
    root = ROOT / "ctxr"
    for path in sorted(root.rglob("*.py"))[:40]:
        text = path.read_text(encoding="utf-8")
        doc = make_code(text, "python", path.name)
        chunks = split_checked(doc, 256)
        assert all(c.prefix not in c.text for c in chunks if c.prefix)


def test_file_head_is_told_what_the_file_defines() -> None:
    # A head of package line, imports and licence says nothing of the class below it; its
    # prefix names the definitions that follow, so "which package holds X?" can find it.
    imports = "".join(f"import com.example.util.Helper{i};\n" for i in range(14))
    body = "".join(
        f"    public int method{i}(int value) {{\n        return value * {i} + offset;\n    }}\n\n"
        for i in range(10)
    )
    text = (
        "/* Copyright 2020 Example Corp. Licensed under the Apache License. */\n"
        f"package com.example.hash;\n\n{imports}\n"
        f"/** Thrown on bad input. */\npublic class BadParametersException {{\n{body}}}\n"
    )
    doc = make_code(text, "java", "BadParametersException.java")
    chunks = split_checked(doc, 96)
    head = chunks[0]
    assert "package com.example.hash;" in head.text and "class Bad" not in head.text
    assert head.prefix.endswith("public class BadParametersException {")
