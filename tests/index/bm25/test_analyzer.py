"""The BM25 analyzer: casefolding, stop words, stemming, identifier splitting, CJK bigrams."""

from __future__ import annotations

import threading

import pytest

from ctxr.index.bm25.analyzer import ENGLISH_STOP_WORDS, Bm25Analyzer


@pytest.fixture(scope="module")
def analyzer() -> Bm25Analyzer:
    return Bm25Analyzer()


def test_name_is_versioned_and_carries_settings() -> None:
    assert Bm25Analyzer().name == "ctxr-bm25/1:english+stem+stop"
    assert Bm25Analyzer(stem=False).name == "ctxr-bm25/1:english+stop"
    assert Bm25Analyzer(stem=False, stopwords=False).name == "ctxr-bm25/1:english"


def test_casefold_and_unicode(analyzer: Bm25Analyzer) -> None:
    assert analyzer.terms("HELLO World") == ["hello", "world"]
    assert Bm25Analyzer(stem=False).terms("Straße ÉCOLE") == ["strasse", "école"]


def test_stop_words_dropped(analyzer: Bm25Analyzer) -> None:
    assert len(ENGLISH_STOP_WORDS) == 33
    assert analyzer.terms("The cat is on the mat") == ["cat", "mat"]
    assert Bm25Analyzer(stopwords=False).terms("the cat") == ["the", "cat"]


def test_stemming(analyzer: Bm25Analyzer) -> None:
    assert analyzer.terms("running") == ["run"]
    assert analyzer.terms("Running dogs RUNS") == ["run", "dog", "run"]
    assert Bm25Analyzer(stem=False).terms("running dogs") == ["running", "dogs"]


def test_digits_kept_and_repeats_kept(analyzer: Bm25Analyzer) -> None:
    assert analyzer.terms("port 8080, port 8080!") == ["port", "8080", "port", "8080"]


def test_camel_and_pascal_case(analyzer: Bm25Analyzer) -> None:
    assert analyzer.terms("getUserName") == ["getusername", "get", "user", "name"]
    assert analyzer.terms("HTTPServer") == ["httpserver", "http", "server"]
    # Digits stay with the subword before them.
    assert analyzer.terms("base64Encode") == ["base64encode", "base64", "encod"]


def test_snake_case(analyzer: Bm25Analyzer) -> None:
    assert analyzer.terms("parse_config_file") == [
        "parse_config_file",
        "pars",
        "config",
        "file",
    ]
    # Decorated names keep their exact form; stop-word parts are dropped, the whole is not.
    assert analyzer.terms("__init__ to_string") == ["__init__", "init", "to_string", "string"]
    assert analyzer.terms("___") == []


def test_dotted_path(analyzer: Bm25Analyzer) -> None:
    assert analyzer.terms("HTTPServer.handle_request") == [
        "httpserver.handle_request",
        "httpserver",
        "http",
        "server",
        "handle_request",
        "handl",
        "request",
    ]
    assert analyzer.terms("os.path.join(x).") == ["os.path.join", "os", "path", "join", "x"]


def test_prose_query_meets_identifier(analyzer: Bm25Analyzer) -> None:
    code = set(analyzer.terms("def handle_request(self): ..."))
    assert set(analyzer.terms("handling requests")) <= code


def test_cjk_bigrams(analyzer: Bm25Analyzer) -> None:
    assert analyzer.terms("東京都") == ["東京", "京都"]
    assert analyzer.terms("日") == ["日"]
    assert analyzer.terms("서울시") == ["서울", "울시"]
    assert analyzer.terms("カタカナ") == ["カタ", "タカ", "カナ"]
    # A CJK run never sticks to Latin letters next to it.
    assert analyzer.terms("東京Tower") == ["東京", "tower"]


@pytest.mark.parametrize("text", ["", "   ", "\n\t  \r\n", "!!! ... ---"])
def test_empty_and_blank_text(analyzer: Bm25Analyzer, text: str) -> None:
    assert analyzer.terms(text) == []


def test_unknown_language_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="stopwords=False"):
        Bm25Analyzer(language="german")
    assert Bm25Analyzer(language="german", stopwords=False).terms("Häuser") == ["haus"]
    with pytest.raises(ValueError, match="stem=False"):
        Bm25Analyzer(language="klingon", stopwords=False)


def test_threads_agree_with_serial() -> None:
    text = " ".join(f"runningDogs{i % 50} jumped_over lazy.foxes{i}" for i in range(300))
    expected = Bm25Analyzer().terms(text)
    shared = Bm25Analyzer()
    results: list[list[str]] = []

    def work() -> None:
        results.append(shared.terms(text))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 8
