"""Orchestration above the parts: indexing runs and the cost estimate.

`build` walks, loads, splits, situates, embeds and writes; `estimate` plans the same run with the
same loader (`collect`), chunker (`chunking`) and recipe (`recipe`) and calls no model;
`report` holds what a run reports.
"""
