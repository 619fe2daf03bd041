"""A trial's rows from `--variant NAME:KEY=VALUE,...` and `--without`."""

from __future__ import annotations

import pytest

from ctxr.errors import ConfigError
from ctxr.eval.variants import parse_variant, trial_variants


def test_default_rows_and_variants() -> None:
    rows = trial_variants(["big:chunk_tokens=400,fusion=rrf", "bm25:context=none,mode=bm25"])
    assert [r.name for r in rows] == ["none", "outline", "llm", "big", "bm25"]
    big = rows[3]
    assert (big.context, big.mode, big.fusion) == ("llm", "hybrid", "rrf")
    assert big.settings() == {"context": "llm", "chunk_tokens": 400}
    # Rows that index alike share an index whatever they search with.
    assert rows[4].index_key == rows[0].index_key
    assert rows[3].index_key != rows[2].index_key


def test_a_variant_replaces_its_namesake_and_without_drops_a_row() -> None:
    rows = trial_variants(["llm:model=gpt-4o-mini,provider=openai"], without=["outline"])
    assert [r.name for r in rows] == ["none", "llm"]
    assert rows[1].settings() == {"context": "llm", "llm_model": "gpt-4o-mini",
                                  "llm_provider": "openai"}  # fmt: skip
    with pytest.raises(ConfigError, match="leaves no row"):
        trial_variants(without=["none", "outline", "llm"])
    with pytest.raises(ConfigError, match="two rows are named 'x'"):
        trial_variants(["x:mode=dense", "x:mode=bm25"])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("x", "no KEY=VALUE"),
        ("bad name:mode=dense", "the name must be"),
        ("x:colour=red", "unknown key 'colour'"),
        ("x:mode", "'mode' is not KEY=VALUE"),
        ("x:context=llm,context=none", "context given twice"),
        ("x:context=pdf", "context must be one of none, outline, llm"),
        ("x:mode=rerank", "mode must be one of hybrid, dense, bm25"),
        ("x:mode=dense,fusion=rrf", "fusion \\(hybrid rows only\\)"),
        ("x:chunk_tokens=big", "chunk_tokens must be a whole number"),
        ("x:candidates=0", "candidates must be at least 1"),
        ("x:chunking=lines", "chunking must be one of"),
        ("x:provider=acme", "provider must be one of"),
        ("x:context=none,model=m", "model and provider apply to context=llm rows only"),
    ],
)
def test_bad_variants_say_the_form(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_variant(spec)
    assert "NAME:KEY=VALUE" in str(caught.value)
