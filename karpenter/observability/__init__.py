"""Observability for the shell: structured logs, the Prometheus metrics and their HTTP server."""
