"""Preflight: is the apiserver there, does it take our credentials, does it serve our CRDs?

Asked once before a command starts its informers or lists, so that a wrong kubeconfig, a dead
apiserver or a cluster without Karpenter's CRDs is one line naming the cause instead of an
informer retrying forever or an exception group.
"""

from __future__ import annotations

from collections.abc import Sequence

import aiohttp

from karpenter.kube import errors
from karpenter.kube.client import NODECLAIMS, NODEPOOLS, KubeClient, Resource

KARPENTER = (NODEPOOLS, NODECLAIMS)
_TIMEOUT_S = 10.0


def _host(kube: KubeClient) -> str:
    return str(getattr(kube.api.configuration, "host", "") or "the apiserver")


async def check(kube: KubeClient, needed: Sequence[Resource] = KARPENTER) -> None:
    """Raise ``errors.Unreachable`` or ``errors.MissingAPI`` when the cluster cannot serve us."""
    host = _host(kube)
    try:
        await kube.server_version()
    except errors.ApiError as err:
        raise errors.Unreachable(f"the apiserver at {host} refused the request: {err}") from None
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        cause = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise errors.Unreachable(f"cannot reach the apiserver at {host}: {cause}") from None
    for group_version in sorted({r.api_version for r in needed if r.group}):
        served = await _served(kube, group_version, host)
        for res in needed:
            if res.api_version == group_version and res.plural not in served:
                raise errors.MissingAPI(
                    f"the apiserver at {host} does not serve {res.plural}.{res.group}/"
                    f"{res.version}: install Karpenter's CRDs (config/crd)"
                )


async def _served(kube: KubeClient, group_version: str, host: str) -> set[str]:
    try:
        doc = await kube.discovery(group_version)
    except errors.NotFound:
        return set()
    except errors.ApiError as err:
        raise errors.Unreachable(f"the apiserver at {host} refused the request: {err}") from None
    return {str(r.get("name") or "") for r in doc.get("resources") or []}
