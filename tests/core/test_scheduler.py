"""The provisioning solver: placement, constraints, launch choice and reasons."""

from __future__ import annotations

from collections import Counter

import pytest

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.pod import (
    SCHEDULE_ANYWAY,
    HostPort,
    Owner,
    PodAffinityTerm,
    WeightedAffinityTerm,
    WeightedNodeTerm,
)
from karpenter.core.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import queue_order, solve
from karpenter.core.scheduling.selectors import LabelSelector
from karpenter.core.scheduling.taints import Taint, Toleration
from tests.support import builders as b

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
CT = "karpenter.sh/capacity-type"


def run(c: Cluster, pods: list, **opts: object) -> Results:  # type: ignore[type-arg]
    return solve(c, pods, Options(**opts))  # type: ignore[arg-type]


def zones_of(r: Results) -> Counter[str]:
    return Counter(c.launch.zone for c in r.new_claims for _ in c.pods)


class TestPacking:
    def test_packs_pods_onto_one_cheapest_fitting_node(self) -> None:
        """Three 1-CPU pods share one NodeClaim launched as the cheapest type that fits them."""
        r = run(b.cluster(), [b.pod() for _ in range(3)])
        assert len(r.new_claims) == 1
        claim = r.new_claims[0]
        assert claim.launch.instance_type == "m-4x"
        assert claim.launch.capacity_type == "spot"
        assert [it.name for it in claim.instance_types] == ["m-4x", "m-8x", "m-16x"]

    def test_pod_too_big_gets_actionable_reason(self) -> None:
        """A pod larger than every type names the resource and the largest allocatable."""
        r = run(b.cluster(), [b.pod("big", cpu="200")])
        assert r.unschedulable == {
            "default/big": "no instance type has 200 cpu; largest allocatable is 15.9"
        }

    def test_extended_resource_must_exist(self) -> None:
        """A GPU request only lands on types that have GPUs."""
        types = (*b.catalog(), b.instance_type("gpu-1", 8, 32, extra={"nvidia.com/gpu": 1}))
        gpu_pod = b.pod("g", requests=res.parse({"nvidia.com/gpu": 1}))
        r = run(b.cluster(types=types), [gpu_pod])
        assert r.new_claims[0].launch.instance_type == "gpu-1"

    def test_queue_orders_by_cpu_then_memory(self) -> None:
        """Pods are tried largest CPU first, then largest memory, then oldest."""
        pods = [b.pod("s", cpu="1"), b.pod("l", cpu="4"), b.pod("m", cpu="1", memory="4Gi")]
        assert [p.name for p in sorted(pods, key=queue_order)] == ["l", "m", "s"]

    def test_existing_node_first(self) -> None:
        """A pod that fits an existing node goes there, and no NodeClaim is made."""
        c = b.cluster(nodes=(b.node("n1"),))
        r = run(c, [b.pod("p")])
        assert not r.new_claims
        assert r.existing == (("n1", (r.existing[0][1][0],)),)

    def test_existing_node_capacity_accounts_bound_pods(self) -> None:
        """Pods already bound consume the node; overflow goes to a new NodeClaim."""
        bound = b.pod("bound", cpu="3", node_name="n1", phase="Running")
        c = b.cluster(nodes=(b.node("n1"),), pods=(bound,))
        r = run(c, [b.pod("p", cpu="2")])
        assert len(r.new_claims) == 1 and not r.existing

    def test_initialized_nodes_preferred(self) -> None:
        """Initialized nodes are tried before uninitialized managed ones."""
        fresh = b.node("a-new", labels={"karpenter.sh/nodepool": "default"})
        ready = b.node(
            "b-ready",
            labels={"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true"},
        )
        r = run(b.cluster(nodes=(fresh, ready)), [b.pod()])
        assert r.existing[0][0] == "b-ready"

    def test_first_fit_fills_inflight_claims(self) -> None:
        """Pods fill the first claim until no type fits more, then start another."""
        r = run(b.cluster(), [b.pod(cpu="3") for _ in range(10)])
        assert [len(c.pods) for c in r.new_claims] == [5, 5]


class TestRequirements:
    @pytest.mark.parametrize(
        ("pool_reqs", "selector", "placed"),
        [
            pytest.param((), {ZONE: "zone-b"}, "zone-b", id="zone-selector"),
            pytest.param(b.term((ZONE, "In", ["zone-a", "zone-c"])), {}, "zone-a", id="pool-zones"),
            pytest.param((), {"node.kubernetes.io/instance-type": "m-8x"}, "zone-a", id="type-sel"),
        ],
    )
    def test_layering(self, pool_reqs: tuple, selector: dict, placed: str) -> None:  # type: ignore[type-arg]
        """NodePool ∩ pod ∩ instance type requirements decide the launch."""
        r = run(b.cluster([b.nodepool(requirements=pool_reqs)]), [b.pod(node_selector=selector)])
        assert r.new_claims[0].launch.zone == placed

    def test_capacity_type_conflict_reason(self) -> None:
        """A pod asking for spot on an on-demand-only pool says which requirements clash."""
        pool = b.nodepool(requirements=b.term((CT, "NotIn", ["spot"])))
        r = run(b.cluster([pool]), [b.pod("p", node_selector={CT: "spot"})])
        assert r.unschedulable["default/p"] == (
            "incompatible with NodePool default: requirement karpenter.sh/capacity-type In [spot]"
            " vs NodePool NotIn [spot]"
        )

    def test_undefined_custom_label_rejected(self) -> None:
        """A custom label the NodePool does not define cannot be selected."""
        r = run(b.cluster(), [b.pod("p", node_selector={"team": "a"})])
        assert "label team does not have known values" in r.unschedulable["default/p"]

    def test_custom_label_from_pool_labels(self) -> None:
        """A NodePool template label satisfies a pod's selector and lands on the node."""
        r = run(b.cluster([b.nodepool(labels={"team": "a"})]), [b.pod(node_selector={"team": "a"})])
        assert r.new_claims[0].labels["team"] == "a"

    def test_exists_on_pool_key_generates_label(self) -> None:
        """A pool requirement `Exists` on a custom key gets a generated label value."""
        pool = b.nodepool(requirements=b.term(("team", "Exists", [])))
        r = run(b.cluster([pool]), [b.pod()])
        assert r.new_claims[0].labels["team"]

    @pytest.mark.parametrize(
        ("op", "value", "ok"),
        [
            pytest.param("Gt", "4", True, id="gt"),
            pytest.param("Lt", "2", True, id="lt"),
            pytest.param("Gt", "16", False, id="gt-none"),
        ],
    )
    def test_numeric_operators(self, op: str, value: str, ok: bool) -> None:
        """Gt/Lt compare integer label values of instance types."""
        types = tuple(
            b.instance_type(f"t{c}", c, 4 * c, labels={"cpus": str(c)}) for c in (1, 2, 8, 16)
        )
        term = b.term(("cpus", op, [value]))
        r = run(b.cluster(types=types), [b.pod("p", cpu="500m", required_node_terms=(term,))])
        assert bool(r.new_claims) is ok

    def test_required_terms_are_alternatives(self) -> None:
        """With several required node-affinity terms, a later one is used when the first fails."""
        terms = (b.term((ZONE, "In", ["nowhere"])), b.term((ZONE, "In", ["zone-c"])))
        r = run(b.cluster(), [b.pod(required_node_terms=terms)])
        assert r.new_claims[0].launch.zone == "zone-c"

    def test_preferred_node_affinity_honoured_then_relaxed(self) -> None:
        """A satisfiable preference is honoured; an impossible one is dropped."""
        good = WeightedNodeTerm(10, b.term((ZONE, "In", ["zone-b"])))
        bad = WeightedNodeTerm(10, b.term((ZONE, "In", ["mars"])))
        r = run(b.cluster(), [b.pod(preferred_node_terms=(good,))])
        assert r.new_claims[0].launch.zone == "zone-b"
        r = run(b.cluster(), [b.pod("p", preferred_node_terms=(bad,))])
        assert r.new_claims and not r.unschedulable

    def test_ignore_preferences(self) -> None:
        """PREFERENCE_POLICY=Ignore never models preferences."""
        good = WeightedNodeTerm(10, b.term((ZONE, "In", ["zone-b"])))
        r = run(b.cluster(), [b.pod(preferred_node_terms=(good,))], preference_policy="Ignore")
        assert r.new_claims[0].launch.zone == "zone-a"


class TestTaints:
    def test_untolerated_pool_taint(self) -> None:
        """A NodePool taint keeps out pods that do not tolerate it, with a reason."""
        pool = b.nodepool(taints=(Taint("gpu", "NoSchedule", "true"),))
        r = run(b.cluster([pool]), [b.pod("p")])
        assert r.unschedulable["default/p"] == (
            "incompatible with NodePool default: did not tolerate taint gpu=true:NoSchedule"
        )

    def test_near_misses_lead_the_reason(self) -> None:
        """A pool the pod could use but that lacks room is named before the pools it is
        incompatible with, whatever their weight: that is the clause a person acts on."""
        tainted = b.nodepool("a-tainted", weight=50, taints=(Taint("gpu", "NoSchedule", "true"),))
        plain = b.nodepool("b-plain")
        r = run(b.cluster([tainted, plain]), [b.pod("p", cpu="900")])
        clauses = r.unschedulable["default/p"].split("; ")
        assert clauses[0].startswith("NodePool b-plain: no instance type has 900 cpu"), clauses
        assert clauses[-1] == (
            "incompatible with NodePool a-tainted: did not tolerate taint gpu=true:NoSchedule"
        )

    @pytest.mark.parametrize(
        "toleration",
        [
            pytest.param(Toleration("gpu", "Equal", "true", "NoSchedule"), id="equal"),
            pytest.param(Toleration("gpu", "Exists"), id="exists-any-effect"),
            pytest.param(Toleration(operator="Exists"), id="tolerate-everything"),
        ],
    )
    def test_tolerations(self, toleration: Toleration) -> None:
        """Equal and Exists tolerations admit the pod."""
        pool = b.nodepool(taints=(Taint("gpu", "NoSchedule", "true"),))
        r = run(b.cluster([pool]), [b.pod(tolerations=(toleration,))])
        assert len(r.new_claims) == 1

    def test_prefer_no_schedule_relaxed(self) -> None:
        """PreferNoSchedule is hard until every other preference is relaxed, then tolerated."""
        pool = b.nodepool(taints=(Taint("soft", "PreferNoSchedule"),))
        r = run(b.cluster([pool]), [b.pod()])
        assert len(r.new_claims) == 1

    def test_startup_taints_do_not_need_toleration(self) -> None:
        """Startup taints are expected to go away; pods need not tolerate them."""
        pool = b.nodepool(startup_taints=(Taint("init", "NoSchedule"),))
        r = run(b.cluster([pool]), [b.pod()])
        assert r.new_claims[0].startup_taints == (Taint("init", "NoSchedule"),)

    def test_cordoned_node_skipped(self) -> None:
        """An unschedulable (cordoned) node receives nothing."""
        r = run(b.cluster(nodes=(b.node("n1", unschedulable=True),)), [b.pod()])
        assert not r.existing and r.new_claims


class TestTopologySpread:
    def test_zonal_spread_balances(self) -> None:
        """maxSkew 1 over zones puts 6 pods two per zone."""
        pods = [b.pod(labels={"app": "web"}, topology_spread=(b.spread(ZONE),)) for _ in range(6)]
        assert zones_of(run(b.cluster(), pods)) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}

    def test_zonal_spread_counts_existing_pods(self) -> None:
        """Pods already running count: new pods go to the emptier zones."""
        n1 = b.node("n1", cpu="1", labels={ZONE: "zone-a"})
        running = [
            b.pod(f"r{i}", cpu="10m", labels={"app": "web"}, node_name="n1", phase="Running")
            for i in range(2)
        ]
        pods = [b.pod(labels={"app": "web"}, topology_spread=(b.spread(ZONE),)) for _ in range(4)]
        r = run(b.cluster(nodes=(n1,), pods=tuple(running)), pods)
        assert zones_of(r) == {"zone-b": 2, "zone-c": 2}

    def test_hostname_spread_one_per_node(self) -> None:
        """maxSkew 1 over hostnames puts each pod on its own node."""
        pods = [b.pod(labels={"app": "web"}, topology_spread=(b.spread(HOST),)) for _ in range(4)]
        assert len(run(b.cluster(), pods).new_claims) == 4

    def test_hostname_spread_skew_two(self) -> None:
        """maxSkew 2 over hostnames allows two per node."""
        tsc = b.spread(HOST, 2)
        pods = [b.pod(labels={"app": "web"}, topology_spread=(tsc,)) for _ in range(4)]
        assert len(run(b.cluster(), pods).new_claims) == 2

    def test_capacity_type_spread(self) -> None:
        """Spreading on karpenter.sh/capacity-type alternates spot and on-demand."""
        pods = [b.pod(labels={"app": "web"}, topology_spread=(b.spread(CT),)) for _ in range(4)]
        r = run(b.cluster(), pods)
        assert Counter(c.launch.capacity_type for c in r.new_claims for _ in c.pods) == {
            "spot": 2,
            "on-demand": 2,
        }

    def test_spread_respects_node_affinity(self) -> None:
        """With nodeAffinityPolicy Honor, only zones the pod may use count toward skew."""
        allowed = b.term((ZONE, "In", ["zone-a", "zone-b"]))
        pods = [
            b.pod(
                labels={"app": "web"},
                topology_spread=(b.spread(ZONE),),
                required_node_terms=(allowed,),
            )
            for _ in range(4)
        ]
        assert zones_of(run(b.cluster(), pods)) == {"zone-a": 2, "zone-b": 2}

    def test_min_domains_forces_zero_minimum(self) -> None:
        """minDomains above the eligible count makes the global minimum 0 (at most maxSkew/zone)."""
        tsc = b.spread(ZONE, min_domains=5)
        pods = [b.pod(f"p{i}", labels={"app": "web"}, topology_spread=(tsc,)) for i in range(4)]
        r = run(b.cluster(), pods)
        assert sum(zones_of(r).values()) == 3
        assert len(r.unschedulable) == 1

    def test_schedule_anyway_relaxed(self) -> None:
        """A ScheduleAnyway spread that cannot hold is dropped rather than failing the pod."""
        pool = b.nodepool(requirements=b.term((ZONE, "In", ["zone-a"])))
        tsc = b.spread(ZONE, min_domains=3, when_unsatisfiable=SCHEDULE_ANYWAY)
        pods = [b.pod(labels={"app": "web"}, topology_spread=(tsc,)) for _ in range(3)]
        r = run(b.cluster([pool]), pods)
        assert not r.unschedulable

    def test_match_label_keys_split_groups(self) -> None:
        """matchLabelKeys spreads each revision independently."""
        tsc = b.spread(HOST, match_label_keys=("rev",))
        pods = [
            b.pod(labels={"app": "web", "rev": rev}, topology_spread=(tsc,)) for rev in ("1", "2")
        ]
        assert len(run(b.cluster(), pods).new_claims) == 1


class TestAffinity:
    def test_self_affinity_in_one_zone(self) -> None:
        """Pods with zonal self-affinity all land in the zone the first one picked."""
        term = b.affinity_term(ZONE, app="db")
        pods = [b.pod(labels={"app": "db"}, cpu="8", required_affinity=(term,)) for _ in range(4)]
        assert len(zones_of(run(b.cluster(), pods))) == 1

    def test_affinity_to_existing_pod(self) -> None:
        """Affinity to a running pod's zone pins the new node to that zone."""
        n1 = b.node("n1", cpu="1", labels={ZONE: "zone-c"})
        cache = b.pod("cache", cpu="500m", labels={"app": "cache"}, node_name="n1")
        term = b.affinity_term(ZONE, app="cache")
        r = run(b.cluster(nodes=(n1,), pods=(cache,)), [b.pod(required_affinity=(term,))])
        assert r.new_claims[0].launch.zone == "zone-c"

    def test_affinity_without_target_unschedulable(self) -> None:
        """Affinity to pods that exist nowhere cannot be satisfied."""
        term = b.affinity_term(ZONE, app="ghost")
        r = run(b.cluster(), [b.pod("p", required_affinity=(term,))])
        assert "affinity" in r.unschedulable["default/p"]

    def test_hostname_anti_affinity_one_per_node(self) -> None:
        """Mutually exclusive pods each get a node."""
        term = b.affinity_term(HOST, app="nginx")
        pods = [b.pod(labels={"app": "nginx"}, required_anti_affinity=(term,)) for _ in range(5)]
        assert len(run(b.cluster(), pods).new_claims) == 5

    def test_zonal_anti_affinity_limits_to_zone_count(self) -> None:
        """Zonal self-anti-affinity places one pod per pass (its claim spans every empty zone)."""
        term = b.affinity_term(ZONE, app="zk")
        pods = [
            b.pod(f"z{i}", labels={"app": "zk"}, required_anti_affinity=(term,)) for i in range(4)
        ]
        r = run(b.cluster(), pods)
        assert len(r.new_claims) == 1 and len(r.unschedulable) == 3
        zone_req = r.new_claims[0].requirements.get(ZONE)
        assert zone_req is not None and sorted(zone_req.values) == ["zone-a", "zone-b", "zone-c"]

    def test_inverse_anti_affinity_of_existing_pod(self) -> None:
        """A running pod's required anti-affinity keeps matching pods off its node."""
        n1 = b.node("n1", cpu="8")
        guard = b.pod(
            "guard",
            cpu="100m",
            node_name="n1",
            required_anti_affinity=(b.affinity_term(HOST, app="web"),),
        )
        r = run(b.cluster(nodes=(n1,), pods=(guard,)), [b.pod(labels={"app": "web"})])
        assert not r.existing and len(r.new_claims) == 1

    def test_preferred_anti_affinity_relaxed(self) -> None:
        """Preferred anti-affinity is relaxed once the empty domains are all held this pass."""
        term = WeightedAffinityTerm(10, b.affinity_term(ZONE, app="w"))
        pods = [b.pod(labels={"app": "w"}, preferred_anti_affinity=(term,)) for _ in range(4)]
        r = run(b.cluster(), pods)
        assert not r.unschedulable and sum(len(c.pods) for c in r.new_claims) == 4

    def test_namespaces_scope_affinity(self) -> None:
        """Anti-affinity only counts pods in the term's namespaces (default: the pod's own)."""
        term = b.affinity_term(HOST, app="x")
        a = b.pod(labels={"app": "x"}, namespace="a", required_anti_affinity=(term,))
        c = b.pod(labels={"app": "x"}, namespace="c", required_anti_affinity=(term,))
        assert len(run(b.cluster(), [a, c]).new_claims) == 1

    def test_namespace_selector_all(self) -> None:
        """An empty namespaceSelector selects every namespace."""
        term = PodAffinityTerm(HOST, b.selector(app="x"), namespace_selector=LabelSelector())
        a = b.pod(labels={"app": "x"}, namespace="a", required_anti_affinity=(term,))
        c = b.pod(labels={"app": "x"}, namespace="c", required_anti_affinity=(term,))
        assert len(run(b.cluster(), [a, c]).new_claims) == 2


class TestVolumesAndPorts:
    def test_pv_node_affinity_pins_zone(self) -> None:
        """A bound PV's zone affinity pins the new node to that zone."""
        pv = PersistentVolume("pv1", (b.term((ZONE, "In", ["zone-b"])),), csi_driver="ebs")
        pvc = PersistentVolumeClaim("default", "data", "gp3", "pv1")
        c = b.cluster(pvs=(pv,), pvcs=(pvc,))
        r = run(c, [b.pod(pvc_names=("data",))])
        assert r.new_claims[0].launch.zone == "zone-b"

    def test_storage_class_allowed_topologies(self) -> None:
        """An unbound WaitForFirstConsumer claim follows the class's allowed topologies."""
        topo = (b.term((ZONE, "In", ["zone-c"])),)
        sc = StorageClass("zonal", "ebs", "WaitForFirstConsumer", topo)
        pvc = PersistentVolumeClaim("default", "data", "zonal")
        r = run(b.cluster(storage_classes=(sc,), pvcs=(pvc,)), [b.pod(pvc_names=("data",))])
        assert r.new_claims[0].launch.zone == "zone-c"

    def test_missing_pvc_reason(self) -> None:
        """A pod whose PVC does not exist is unschedulable and says so."""
        r = run(b.cluster(), [b.pod("p", pvc_names=("nope",))])
        assert r.unschedulable["default/p"] == 'persistentvolumeclaim "nope" not found'

    def test_csi_volume_limit_on_existing_node(self) -> None:
        """A node at its CSI attach limit takes no pod with another volume of that driver."""
        pvcs = tuple(PersistentVolumeClaim("default", f"v{i}", "", f"pv{i}") for i in range(2))
        pvs = tuple(PersistentVolume(f"pv{i}", (), csi_driver="ebs") for i in range(2))
        running = b.pod("r", cpu="100m", node_name="n1", pvc_names=("v0",))
        c = b.cluster(
            nodes=(b.node("n1"),),
            pods=(running,),
            pvcs=pvcs,
            pvs=pvs,
            csinodes=(CSINode("n1", {"ebs": 1}),),
        )
        r = run(c, [b.pod(pvc_names=("v1",))])
        assert not r.existing and len(r.new_claims) == 1

    def test_host_port_conflict(self) -> None:
        """Two pods binding the same host port do not share a node."""
        port = (HostPort(8080),)
        r = run(b.cluster(), [b.pod(host_ports=port), b.pod(host_ports=port)])
        assert len(r.new_claims) == 2

    def test_host_ports_on_different_ips(self) -> None:
        """The same port on two specific IPs does not conflict."""
        a, c = (HostPort(80, ip="10.0.0.1"),), (HostPort(80, ip="10.0.0.2"),)
        assert len(run(b.cluster(), [b.pod(host_ports=a), b.pod(host_ports=c)]).new_claims) == 1


class TestDaemonsLimitsWeights:
    def test_daemonset_overhead_counts(self) -> None:
        """Daemon overhead is reserved on the new node and added to its requests."""
        ds = b.daemonset("agent", cpu="1")
        r = run(b.cluster(daemonsets=(ds,)), [b.pod(cpu="3")])
        claim = r.new_claims[0]
        assert claim.launch.instance_type == "m-8x"  # 3 + 1 daemon > 3.9 allocatable of m-4x
        assert claim.requests["cpu"] == 4000

    def test_daemonset_not_tolerating_pool_taint_is_no_overhead(self) -> None:
        """A daemon that does not tolerate the pool's taint would not run, so costs nothing."""
        pool = b.nodepool(taints=(Taint("x", "NoSchedule"),))
        ds = b.daemonset("agent", cpu="1")
        pod = b.pod(cpu="3", tolerations=(Toleration("x", "Exists"),))
        claim = run(b.cluster([pool], daemonsets=(ds,)), [pod]).new_claims[0]
        assert claim.launch.instance_type == "m-4x"

    def test_daemonset_pods_are_not_provisioned(self) -> None:
        """The solver is never asked to place DaemonSet pods (the loader keeps them out)."""
        p = b.pod(owners=(Owner("DaemonSet", "agent"),))
        assert p.is_daemonset_pod()

    def test_cpu_limit(self) -> None:
        """A NodePool at its CPU limit refuses more nodes, saying which limit."""
        pool = b.nodepool("gpu", limits=b.requests(cpu="4"))
        r = run(b.cluster([pool]), [b.pod(cpu="3"), b.pod("second", cpu="3")])
        assert len(r.new_claims) == 1
        assert r.unschedulable["default/second"] == "NodePool gpu: limits cpu=4 exceeded"

    def test_nodes_limit(self) -> None:
        """limits.nodes caps the number of NodeClaims."""
        pool = b.nodepool(limits={"nodes": 2000})
        pods = [b.pod(cpu="15") for _ in range(3)]
        r = run(b.cluster([pool]), pods)
        assert len(r.new_claims) == 2 and len(r.unschedulable) == 1

    def test_weight_orders_pools(self) -> None:
        """The highest-weight pool that can serve the pod is used."""
        pools = [b.nodepool("low", weight=1), b.nodepool("high", weight=50)]
        assert run(b.cluster(pools), [b.pod()]).new_claims[0].nodepool == "high"

    def test_fallback_to_lower_weight(self) -> None:
        """When the heavy pool cannot serve the pod, a lighter one does."""
        heavy = b.nodepool("heavy", weight=50, requirements=b.term((ZONE, "In", ["zone-a"])))
        pools = [heavy, b.nodepool("light", weight=1)]
        pod = b.pod(node_selector={ZONE: "zone-b"})
        assert run(b.cluster(pools), [pod]).new_claims[0].nodepool == "light"

    def test_min_values_strict(self) -> None:
        """minValues on instance types fails when too few types remain."""
        pool = b.nodepool(requirements=(("node.kubernetes.io/instance-type", "Exists", (), 4),))
        r = run(b.cluster([pool]), [b.pod("p", cpu="6")])
        assert len(r.unschedulable) == 1 and not r.new_claims

    def test_min_values_best_effort(self) -> None:
        """With MIN_VALUES_POLICY=BestEffort the claim launches and says it was relaxed."""
        pool = b.nodepool(requirements=(("node.kubernetes.io/instance-type", "Exists", (), 4),))
        r = run(b.cluster([pool]), [b.pod(cpu="6")], min_values_policy="BestEffort")
        assert r.new_claims[0].min_values_relaxed

    def test_min_values_keeps_enough_types(self) -> None:
        """Satisfied minValues keeps at least that many types on the claim."""
        pool = b.nodepool(requirements=(("node.kubernetes.io/instance-type", "Exists", (), 3),))
        r = run(b.cluster([pool]), [b.pod(cpu="1")])
        assert len(r.new_claims[0].instance_types) >= 3

    def test_truncation(self) -> None:
        """A claim lists at most max_instance_types types, the cheapest."""
        r = run(b.cluster(), [b.pod(cpu="100m")], max_instance_types=2)
        assert [it.name for it in r.new_claims[0].instance_types] == ["m-1x", "m-2x"]

    def test_unavailable_offering_skipped(self) -> None:
        """An unavailable offering is never the launch choice."""
        types = (b.instance_type("only", 4, 16, unavailable=[("zone-a", "on-demand")]),)
        r = run(b.cluster(types=types), [b.pod()])
        assert r.new_claims[0].launch.zone == "zone-b"

    def test_launch_prefers_cheapest_offering(self) -> None:
        """Spot is chosen when cheaper and allowed; on-demand when the pool forbids spot."""
        r = run(b.cluster(), [b.pod()])
        assert r.new_claims[0].launch.capacity_type == "spot"
        pool = b.nodepool(requirements=b.term((CT, "In", ["on-demand"])))
        assert run(b.cluster([pool]), [b.pod()]).new_claims[0].launch.capacity_type == "on-demand"

    def test_deterministic(self) -> None:
        """Two runs on the same input give the same answer."""
        pods = [b.pod(labels={"app": "web"}, topology_spread=(b.spread(ZONE),)) for _ in range(9)]
        c = b.cluster()
        first, second = run(c, pods), run(c, pods)
        assert [(x.launch, [p.name for p in x.pods]) for x in first.new_claims] == [
            (x.launch, [p.name for p in x.pods]) for x in second.new_claims
        ]
