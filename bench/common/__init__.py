"""What the benchmarks share: `measure` (time, peak memory, load average, ratios), `checkout`
(paths and child processes of this checkout) and the corpora several benchmarks build on."""
