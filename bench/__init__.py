"""Benchmarks, run by hand (`make bench`); results are recorded in bench/RESULTS.md."""
