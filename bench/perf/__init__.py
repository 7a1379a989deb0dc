"""Upstream's performance suite on the local control plane + kwok (bench/perf_suite.py)."""
