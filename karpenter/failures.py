"""One line for a person, whatever went wrong below the CLI.

Task groups wrap failures in exception groups; this finds the leaf that names the cause (a
kubeconfig, an apiserver, a CRD, a file, a setting) and says it in one line. Anything else is
named by its type and first line, never as a traceback (``KARPENTER_DEBUG=1`` shows that).
"""

from __future__ import annotations

import aiohttp

from karpenter.aio import groups
from karpenter.kube import errors

# Best first: a cause a person can act on wins over whatever it set off.
_KNOWN: tuple[type[BaseException], ...] = (
    errors.ClientSetupError,
    errors.ApiError,
    aiohttp.ClientError,
    OSError,
    ValueError,
)


def _line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def describe(err: BaseException) -> str:
    """The cause of ``err`` in one line."""
    for kind in _KNOWN:
        leaf = groups.first(err, (kind,))
        if leaf is None:
            continue
        if isinstance(leaf, errors.ClientSetupError):
            return _line(leaf)
        if isinstance(leaf, errors.ApiError):
            return f"the apiserver refused a request: {_line(leaf)}"
        if isinstance(leaf, aiohttp.ClientError):
            return f"cannot reach the apiserver: {_line(leaf)}"
        return _line(leaf)
    leaf = next(groups.leaves(err))
    return f"unexpected {type(leaf).__name__}: {_line(leaf)}"
