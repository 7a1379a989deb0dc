# One Makefile for the checks a newcomer and CI run (see README.md).
PY ?= python3

.PHONY: install check test bench presubmit golden

install:
	$(PY) -m pip install -q -e '.[dev]'

check:
	ruff check karpenter tests bench
	ruff format --check karpenter tests bench
	mypy
	lint-imports

test:
	$(PY) -m pytest -q

bench:
	$(PY) bench/scheduling.py

presubmit: check test
