"""Retrieval: fusing the dense and BM25 rankings, and the search service over an index."""
