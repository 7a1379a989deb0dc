"""In-flight capacity in a later pass: nominated pods go back to their claims, and a claim not
launched yet counts what any of its instance types would give."""

from __future__ import annotations

from karpenter.core.model.cluster import Options
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import solve
from tests.support import builders as b

M4 = b.instance_type("m-4x", 4, 16)
M8 = b.instance_type("m-8x", 8, 32)
TYPES = (M4, M8)


def _launched(name: str) -> NodeClaim:
    """A claim an earlier pass created, launched as m-4x (3.9 CPU allocatable), no Node yet."""
    return NodeClaim(
        name,
        "default",
        {
            "karpenter.sh/nodepool": "default",
            "node.kubernetes.io/instance-type": "m-4x",
            "topology.kubernetes.io/zone": "zone-a",
            "karpenter.sh/capacity-type": "on-demand",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
        },
        provider_id=f"test://{name}",
        capacity=dict(M4.capacity),
        allocatable=M4.allocatable,
        launched=True,
    )


def _pass(claims: tuple[NodeClaim, ...], pending: list[Pod]) -> Results:
    cluster = b.cluster(types=TYPES, nodeclaims=claims, pods=tuple(pending))
    return solve(cluster, pending, Options())


def _placed(r: Results) -> dict[str, list[str]]:
    return {node: sorted(p.name for p in pods) for node, pods in r.existing}


# Two full m-4x claims: a = 1.6 + 1.2 + 1.1, b = 1.5 + 1.3 + 1.1 (3.9 CPU each). First-fit
# decreasing over the same six pods puts 1.6 and 1.5 together and strands one 1.1 pod.
PACKING = {"a": ("1600m", "1200m", "1100m"), "b": ("1500m", "1300m", "1100m")}


def _packed(*, nominated: bool) -> list[Pod]:
    return [
        b.pod(f"{claim}-{i}", cpu=cpu, memory="1Gi", nominated_node_name=claim * nominated)
        for claim, cpus in PACKING.items()
        for i, cpu in enumerate(cpus)
    ]


def test_nominated_pods_return_to_their_inflight_claims() -> None:
    """Pods placed on in-flight claims by an earlier pass go back there; nothing new is bought."""
    r = _pass((_launched("a"), _launched("b")), _packed(nominated=True))
    assert r.new_claims == ()
    assert _placed(r) == {"a": ["a-0", "a-1", "a-2"], "b": ["b-0", "b-1", "b-2"]}


def test_repacking_without_nominations_would_strand_a_pod() -> None:
    """The same pods without their nominations re-pack first-fit and need a third node (the
    case the nominations exist for)."""
    r = _pass((_launched("a"), _launched("b")), _packed(nominated=False))
    assert len(r.new_claims) == 1


def test_new_pods_fill_the_room_left_on_inflight_claims() -> None:
    """A new pod that fits next to the nominated ones joins an in-flight claim."""
    claim = _launched("a")
    pending = [
        b.pod("old", cpu="2", memory="1Gi", nominated_node_name="a"),
        b.pod("new", cpu="1500m", memory="1Gi"),
    ]
    r = _pass((claim,), pending)
    assert r.new_claims == ()
    assert _placed(r) == {"a": ["new", "old"]}


def test_a_nomination_that_no_longer_fits_falls_back_to_normal_placement() -> None:
    """A nominated pod too big for its target is placed like any other pod."""
    pending = [b.pod("huge", cpu="6", memory="1Gi", nominated_node_name="a")]
    r = _pass((_launched("a"),), pending)
    assert [c.launch.instance_type for c in r.new_claims] == ["m-8x"]


def _unlaunched(requests_cpu: str) -> NodeClaim:
    return NodeClaim(
        "pending-claim",
        "default",
        {"karpenter.sh/nodepool": "default"},
        requirements=b.term(("node.kubernetes.io/instance-type", "In", ["m-4x", "m-8x"])),
        requests=b.requests(cpu=requests_cpu, memory="1Gi", pods=1),
    )


def test_unlaunched_claim_counts_the_least_its_types_guarantee() -> None:
    """A claim without a launch yet holds what its smallest fitting type allocates (3.9 CPU):
    a 1.5-CPU pod beside its 2-CPU request fits there."""
    pending = [
        b.pod("old", cpu="2", memory="1Gi", nominated_node_name="pending-claim"),
        b.pod("new", cpu="1500m", memory="1Gi"),
    ]
    r = _pass((_unlaunched("2"),), pending)
    assert r.new_claims == ()
    assert _placed(r) == {"pending-claim": ["new", "old"]}


def test_unlaunched_claim_never_promises_more_than_its_smallest_type() -> None:
    """Beyond the smallest type's allocatable, new capacity is bought (the cloud may launch
    that smallest type)."""
    pending = [
        b.pod("old", cpu="2", memory="1Gi", nominated_node_name="pending-claim"),
        b.pod("new", cpu="2", memory="1Gi"),
    ]
    r = _pass((_unlaunched("2"),), pending)
    assert len(r.new_claims) == 1
    assert _placed(r) == {"pending-claim": ["old"]}
