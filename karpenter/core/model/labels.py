"""Well-known label, annotation and taint keys of Karpenter and Kubernetes; key normalization."""

from __future__ import annotations

NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
HOSTNAME = "kubernetes.io/hostname"

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"
CAPACITY_TYPES = frozenset({CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED})

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
NODEPOOL_HASH_VERSION_CURRENT = "v3"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
MIN_VALUES_RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"

TAINT_DISRUPTED = "karpenter.sh/disrupted"
TAINT_UNREGISTERED = "karpenter.sh/unregistered"
FINALIZER_TERMINATION = "karpenter.sh/termination"

# Labels a NodePool may leave undefined: the cloud provider resolves them at launch.
WELL_KNOWN_LABELS = frozenset(
    {NODEPOOL, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, WINDOWS_BUILD}
)

_NORMALIZED = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}

# Simulated Nodes and the kwok beside them (sandbox/kwok.py): kwok adopts Nodes annotated
# KWOK_NODE; its node-agent Stage removes the startup taints listed (comma-separated keys) in
# AGENT_TAINTS after AGENT_DELAY (a Go duration) once the Node is Ready.
KWOK_NODE = ("kwok.x-k8s.io/node", "fake")
AGENT_TAINTS = "simulated.karpenter.sh/agent-removes-taints"
AGENT_DELAY = "simulated.karpenter.sh/agent-delay"

RESTRICTED_DOMAINS = ("karpenter.sh",)
RESTRICTED_LABELS = frozenset({HOSTNAME})


def normalize_key(key: str) -> str:
    """Map deprecated beta label keys onto their GA names, as the scheduler treats them alike."""
    return _NORMALIZED.get(key, key)


def label_domain(key: str) -> str:
    """The DNS prefix of a label key (``"karpenter.sh"`` for ``karpenter.sh/nodepool``)."""
    return key.split("/", 1)[0] if "/" in key else ""


def is_restricted(key: str, well_known: frozenset[str] = WELL_KNOWN_LABELS) -> bool:
    """True for keys a user may not set on a NodePool (Karpenter's own domain, hostname)."""
    if key in well_known or key in RESTRICTED_LABELS:
        return key in RESTRICTED_LABELS
    domain = label_domain(key)
    return any(domain == d or domain.endswith("." + d) for d in RESTRICTED_DOMAINS)
