import re
from pathlib import Path

import pytest

from ctxr.config import Settings, load_settings
from ctxr.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_env_example_lists_every_setting() -> None:
    listed = set(re.findall(r"^#?\s*CTXR_([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    fields = {name.upper() for name in Settings.model_fields}
    assert fields == listed


def test_environment_then_flags_take_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXR_CHUNK_TOKENS", "300")
    assert load_settings().chunk_tokens == 300
    assert load_settings(chunk_tokens=120).chunk_tokens == 120
    assert load_settings(chunk_tokens=None).chunk_tokens == 300  # None = flag not given


def test_invalid_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXR_RRF_K", "zero")
    with pytest.raises(ConfigError, match="CTXR_RRF_K"):
        load_settings()


def test_dotenv_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("CTXR_CANDIDATES=77\n")
    monkeypatch.chdir(tmp_path)
    assert load_settings().candidates == 77
