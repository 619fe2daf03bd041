"""`GET /trials`: the `ctxr trial` reports a server was started with, under the token rules,
each read when asked for; a missing or damaged report is named, not an error of the answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from tests.fixtures.index import BuiltIndex
from tests.fixtures.trials import write_trial

TOKEN = "trial-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(examples_index: BuiltIndex, *trials: Path) -> TestClient:
    settings = examples_index.settings_with(
        api_token=TOKEN, api_trials=tuple(str(t) for t in trials)
    )
    return TestClient(create_app(settings))


def test_trials_are_read_from_their_files_and_folders(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    folder = tmp_path / "ctxr-trial"
    write_trial(folder)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with _client(examples_index, folder, tmp_path / "gone", broken) as client:
        assert client.get("/trials").status_code == 401
        trials = client.get("/trials", headers=AUTH).json()["trials"]
    good, gone, bad = trials
    assert good["path"] == str(folder / "trial.json") and good["error"] is None
    assert good["verdict"].startswith("LLM contexts pay on this sample")
    assert [r["name"] for r in good["rows"]] == ["none", "outline", "llm"]
    assert good["rows"][2]["scores"]["pass@10"] == pytest.approx(
        {"mean": 0.9, "low": 0.84, "high": 0.95}
    )
    assert [c["significant"] for c in good["comparisons"]] == [False, True]
    assert good["costs"][0]["estimate_corpus"]["batch"] == 0.1
    assert "no such file" in gone["error"] and gone["rows"] == []
    assert bad["error"].startswith("not a ctxr trial report")


def test_a_trial_run_again_is_shown_as_it_now_stands(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    path = write_trial(tmp_path / "t")
    with _client(examples_index, path) as client:
        first = client.get("/trials", headers=AUTH).json()["trials"][0]
        path.write_text(path.read_text().replace("claude-haiku-4-5", "gpt-4o-mini"))
        second = client.get("/trials", headers=AUTH).json()["trials"][0]
    assert first["costs"][0]["model"] == "claude-haiku-4-5"
    assert second["costs"][0]["model"] == "gpt-4o-mini"


def test_no_trial_is_an_empty_list(examples_index: BuiltIndex) -> None:
    with _client(examples_index) as client:
        assert client.get("/trials", headers=AUTH).json() == {"trials": []}
