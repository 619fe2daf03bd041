"""ctxr's benchmarks, grouped by what they measure; see bench/README.md.

Each benchmark is a module run from the repository root: ``python -m bench.speed.search_latency``.
What they share (timing, peak memory, the load average, the test suite's fakes, corpora) lives
in ``bench.common``; no benchmark imports another.
"""
