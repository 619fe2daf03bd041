"""Measuring retrieval quality against data sets with relevance judgments.

``metrics`` holds pure scoring functions over ids (no I/O, no index), so that the same numbers
can be recomputed from a saved run; ``datasets`` turns the on-disk evaluation sets
(Anthropic's contextual-retrieval codebase set, BEIR) into one shape the harness can index
and query, and fails with a message saying what to fix when the files are not there.
"""
