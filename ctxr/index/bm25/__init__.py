"""BM25: the analyzer that turns text into terms (`analyzer`) and the pure weighting functions
(`weights`); Qdrant applies the IDF modifier at query time.
"""
