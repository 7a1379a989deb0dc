"""The in-memory cluster mirror fed by informers."""
