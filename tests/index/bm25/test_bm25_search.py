"""BM25 through the whole pipeline: CJK text and code identifiers find their chunks."""

from __future__ import annotations

from pathlib import Path

from ctxr.config import load_settings
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from tests.fakes.hash_embedder import HashEmbedder

CODE = '''class HTTPServer:
    def handle_request(self, request):
        """Route one request to its handler."""
        return self.router.dispatch(request)


def parse_retry_after(headers):
    return float(headers.get("retry-after", 0))
'''
JAPANESE = "東京都の天気予報です。明日は晴れ、最高気温は二十五度の見込みです。\n"
KOREAN = "서울특별시의 지하철 노선도는 매우 복잡합니다.\n"
PROSE = "Running a small server at home needs little power and a quiet fan.\n"


def _service(tmp_path: Path) -> SearchService:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "server.py").write_text(CODE)
    (corpus / "weather.txt").write_text(JAPANESE)
    (corpus / "subway.txt").write_text(KOREAN)
    (corpus / "home.txt").write_text(PROSE)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    build_index([corpus], settings, embedder=HashEmbedder())
    return SearchService(settings, embedder=HashEmbedder())


def _top_source(service: SearchService, query: str) -> str:
    hits = service.search(query, k=1, mode="bm25")
    assert hits, f"no BM25 hit for {query!r}"
    return hits[0].source.rsplit("/", 1)[-1]


def test_cjk_and_identifier_queries_find_their_chunks(tmp_path: Path) -> None:
    with _service(tmp_path) as service:
        assert _top_source(service, "東京の天気") == "weather.txt"  # bigrams, no spaces
        assert _top_source(service, "지하철") == "subway.txt"
        assert _top_source(service, "handleRequest") == "server.py"  # camelCase vs snake_case
        assert _top_source(service, "retry_after parsing") == "server.py"
        assert _top_source(service, "HTTPServer") == "server.py"
        assert _top_source(service, "servers running at home") == "home.txt"  # stemming
        assert service.search("天気予報", k=5, mode="bm25")[0].scores["bm25"].score > 0
