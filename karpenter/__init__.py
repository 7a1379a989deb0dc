"""Karpenter, the Kubernetes node autoscaler: the package root (nothing is re-exported here).

One import-time choice lives here because it must precede every ``import structlog``: structlog
imports rich (and through it pygments) whenever rich is installed, only to pretty-print
tracebacks in its development console. rich is installed for ``karpenter viewer``; in the
controller it would cost 3 MB of resident memory for nothing (its imports: 65 → 62 MB without
it; the controller writes JSON, or plain console lines with plain tracebacks). structlog is
therefore imported with rich hidden; rich stays importable, and the viewer imports it as usual.
"""

import sys

if "structlog" not in sys.modules and "rich" not in sys.modules:
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]
