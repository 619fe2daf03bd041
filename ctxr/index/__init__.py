"""Indexing: dense embedders, the BM25 analyzer, the Qdrant stores and the manifest."""
