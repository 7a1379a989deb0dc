"""Cluster-default topology spread: selector deduction, injection, and its effect on solving."""

from __future__ import annotations

from collections import Counter

from karpenter.core.model.cluster import Options
from karpenter.core.model.pod import SCHEDULE_ANYWAY, Owner, Pod, TopologySpread
from karpenter.core.provisioning import defaultspread as ds
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.scheduling.selectors import LabelSelector, SelectorExpression
from tests.support import builders as b

ZONE = "topology.kubernetes.io/zone"
RS = Owner("ReplicaSet", "web-7d9", "apps/v1", controller=True)
ZONAL = TopologySpread(ZONE, 1)


def _in(key: str, value: str) -> SelectorExpression:
    return SelectorExpression(key, "In", frozenset({value}))


class TestDeduceSelector:
    def test_matching_services_merge_as_labels(self) -> None:
        """Every Service that selects the pod contributes its selector; others do not."""
        pod = b.pod(labels={"app": "web", "tier": "front"})
        services = [{"app": "web"}, {"tier": "front"}, {"app": "db"}]
        got = ds.deduce_selector(pod, services, None)
        assert got == LabelSelector((("app", "web"), ("tier", "front")))

    def test_service_without_selector_selects_nothing(self) -> None:
        """A Service with no selector contributes nothing; no owner either → no selector."""
        assert ds.deduce_selector(b.pod(labels={"app": "web"}), [None], None) is None

    def test_empty_service_selector_matches_but_adds_nothing(self) -> None:
        """An empty selector matches every pod but leaves the selector empty → no defaults."""
        assert ds.deduce_selector(b.pod(labels={"app": "web"}), [{}], None) is None

    def test_owner_terms_are_anded_as_expressions(self) -> None:
        """The controller's matchLabels become In requirements next to its expressions."""
        owner = LabelSelector((("app", "web"),), (SelectorExpression("env", "Exists"),))
        got = ds.deduce_selector(b.pod(labels={"app": "web", "env": "p"}), [], owner)
        assert got == LabelSelector((), (_in("app", "web"), SelectorExpression("env", "Exists")))

    def test_service_and_owner_combine(self) -> None:
        """Both sources appear, the Services' as labels and the owner's as requirements."""
        pod = b.pod(labels={"app": "web", "pod-template-hash": "7d9"})
        owner = LabelSelector((("pod-template-hash", "7d9"),))
        got = ds.deduce_selector(pod, [{"app": "web"}], owner)
        assert got == LabelSelector((("app", "web"),), (_in("pod-template-hash", "7d9"),))
        assert got is not None and got.matches(pod.labels)

    def test_only_rc_rs_and_statefulset_owners_count(self) -> None:
        """A Job or DaemonSet controller is not a selector owner; a ReplicaSet is."""
        job = b.pod(owners=(Owner("Job", "j", "batch/v1", controller=True),))
        assert ds.selector_owner(job) is None
        assert ds.selector_owner(b.pod(owners=(RS,))) == RS
        rc = Owner("ReplicationController", "r", "v1", controller=True)
        assert ds.selector_owner(b.pod(owners=(rc,))) == rc
        not_controller = Owner("ReplicaSet", "x", "apps/v1", controller=False)
        assert ds.selector_owner(b.pod(owners=(not_controller,))) is None


class TestApplyDefaults:
    def test_stamps_each_default_with_the_pod_selector(self) -> None:
        """A pod with no constraints gets every default, carrying its deduced selector."""
        sel = LabelSelector((("app", "web"),))
        hosts = TopologySpread("kubernetes.io/hostname", 2, SCHEDULE_ANYWAY)
        (pod,) = ds.apply_defaults([b.pod()], (ZONAL, hosts), lambda p: sel)
        assert pod.topology_spread == (
            TopologySpread(ZONE, 1, selector=sel),
            TopologySpread("kubernetes.io/hostname", 2, SCHEDULE_ANYWAY, selector=sel),
        )

    def test_own_constraints_win_all_or_nothing(self) -> None:
        """A pod declaring any constraint keeps exactly its own."""
        own = b.spread("kubernetes.io/hostname")
        original = b.pod(topology_spread=(own,))
        (pod,) = ds.apply_defaults([original], (ZONAL,), lambda p: LabelSelector())
        assert pod is original

    def test_no_selector_no_defaults(self) -> None:
        """A pod whose selector cannot be deduced stays unconstrained."""
        original = b.pod()
        assert ds.apply_defaults([original], (ZONAL,), lambda p: None) == [original]


def _zones(pods: list[Pod]) -> Counter[str]:
    r = solve(b.cluster(), pods, Options())
    return Counter(c.launch.zone for c in r.new_claims for _ in c.pods)


def test_defaults_spread_a_replicaset_across_zones() -> None:
    """Six replicas pack into one zone alone, and spread two per zone with the default."""
    pods = [b.pod(labels={"app": "web"}, owners=(RS,)) for _ in range(6)]
    assert len(_zones(pods)) == 1
    owner_sel = LabelSelector((("app", "web"),))
    spread = ds.apply_defaults(pods, (ZONAL,), lambda p: ds.deduce_selector(p, [], owner_sel))
    assert _zones(spread) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
