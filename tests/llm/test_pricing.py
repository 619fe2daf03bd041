"""Prices: the packaged table, hand-computed costs, user overrides and unknown models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxr.errors import ConfigError
from ctxr.llm.base import Usage
from ctxr.llm.pricing import canonical_model, load_prices

REQUIRED = (
    "claude-haiku-4-5",
    "claude-3-5-haiku",
    "claude-3-haiku",
    "claude-sonnet-4-5",
    "gpt-4o-mini",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "gpt-5-mini",
)


def test_packaged_table_has_the_models_and_anthropics_cache_ratios() -> None:
    table = load_prices()
    assert table.prices_read and table.sources
    for model in REQUIRED:
        price = table.get(model)
        assert price.input > 0 and price.output > 0 and price.batch_discount == 0.5
        if price.provider == "anthropic":
            # 1.25x and 0.1x input; Claude Haiku 3's list prices are rounded ($0.30, $0.03).
            assert price.cache_write == pytest.approx(1.25 * price.input, rel=0.05)
            assert price.cache_read == pytest.approx(0.1 * price.input, rel=0.2)
        else:
            assert price.cache_write == price.input  # OpenAI bills no cache-write surcharge
            assert price.cache_read < price.input


def test_cost_by_hand_for_claude_haiku_4_5() -> None:
    # $1 input, $1.25 cache write, $0.10 cache read, $5 output per million tokens.
    usage = Usage(
        input_tokens=1_000, cache_write_tokens=8_000, cache_read_tokens=80_000, output_tokens=2_000
    )
    expected = (1_000 * 1.0 + 8_000 * 1.25 + 80_000 * 0.1 + 2_000 * 5.0) / 1e6
    assert expected == pytest.approx(0.029)
    table = load_prices()
    assert table.cost("claude-haiku-4-5", usage) == pytest.approx(0.029)
    assert table.cost("claude-haiku-4-5-20251001", usage, batch=True) == pytest.approx(0.0145)


def test_cost_by_hand_for_gpt_4o_mini() -> None:
    # $0.15 input, $0.075 cached input, $0.60 output per million tokens.
    usage = Usage(input_tokens=2_000_000, cache_read_tokens=4_000_000, output_tokens=500_000)
    assert load_prices().cost("gpt-4o-mini-2024-07-18", usage) == pytest.approx(0.9)


def test_snapshot_suffixes_fall_back_to_the_base_model() -> None:
    assert canonical_model("claude-3-5-haiku-20241022") == "claude-3-5-haiku"
    assert canonical_model("claude-3-5-haiku-latest") == "claude-3-5-haiku"
    assert canonical_model("claude-sonnet-4-0") == "claude-sonnet-4"
    assert canonical_model("gpt-4.1-mini-2025-04-14") == "gpt-4.1-mini"
    assert canonical_model("gpt-4o") == "gpt-4o"


def test_user_file_overrides_a_field_and_adds_a_model(tmp_path: Path) -> None:
    user = tmp_path / "prices.json"
    user.write_text(
        json.dumps(
            {
                "prices_read": "2027-01-01",
                "models": {
                    "gpt-4o-mini": {"input": 0.2},
                    "llama3.1:8b": {"input": 0, "output": 0},
                    "my-model-2025-01-01": {
                        "provider": "openai",
                        "input": 1,
                        "cache_read": 0.5,
                        "output": 2,
                        "batch_discount": 0.25,
                    },
                },
            }
        )
    )
    table = load_prices(user)
    mini = table.get("gpt-4o-mini")
    assert (mini.input, mini.cache_read, mini.output) == (0.2, 0.075, 0.6)
    assert table.cost("llama3.1:8b", Usage(10**6, 0, 10**6, 10**6)) == 0
    mine = table.get("my-model-2025-01-01")
    assert mine.cache_write == 1.0  # defaults to the input price
    assert table.cost("my-model-2025-01-01", Usage(10**6), batch=True) == pytest.approx(0.75)
    assert "2027-01-01" in table.prices_read
    assert table.get("claude-haiku-4-5").input == 1.0  # untouched


def test_unknown_model_says_how_to_add_a_price(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_prices().cost("mystery-model", Usage(1))
    message = str(caught.value)
    assert "mystery-model" in message and "CTXR_PRICES_FILE" in message
    assert '"models"' in message and '"input"' in message
    user = tmp_path / "prices.json"
    user.write_text('{"models": {}}')
    with pytest.raises(ConfigError, match=str(user)):
        load_prices(user).get("mystery-model")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not valid JSON"),
        ('{"gpt-4o-mini": {}}', '"models"'),
        ('{"models": {"new": {"input": 1}}}', "output"),
        ('{"models": {"gpt-4o-mini": {"input": -1}}}', "out of range"),
        ('{"models": {"gpt-4o-mini": {"input": "cheap"}}}', "must be a number"),
        ('{"models": {"gpt-4o-mini": {"inptu": 1}}}', "unknown field"),
    ],
)
def test_a_bad_user_file_names_the_file_and_the_problem(
    tmp_path: Path, content: str, match: str
) -> None:
    user = tmp_path / "prices.json"
    user.write_text(content)
    with pytest.raises(ConfigError, match=match):
        load_prices(user)


def test_a_missing_user_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="CTXR_PRICES_FILE"):
        load_prices(tmp_path / "absent.json")
