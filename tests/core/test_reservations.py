"""Reserved capacity in the provisioning solver: the ledger, strict and fallback modes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from karpenter.core.disruption.planner import decide
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.nodepool import Budget, Disruption
from karpenter.core.provisioning.reservations import (
    FALLBACK,
    NARROWING_MESSAGE,
    STRICT,
    UNAVAILABLE_MESSAGE,
    ReservationManager,
    Reservations,
)
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.provisioning.topology import Reject
from karpenter.core.scheduling.requirements import Requirement, Requirements
from tests.support import builders as b

RID = "karpenter.test.sh/reservation-id"
CT = "karpenter.sh/capacity-type"
OPTIONS = Options(reservation_id_label=RID)


def reserved_type(name: str, cpu: int, reservations: dict[str, tuple[str, int]]) -> InstanceType:
    """An on-demand type plus one reserved offering per ``{id: (zone, capacity)}``."""
    base = b.instance_type(name, cpu, 4 * cpu)
    extra = tuple(
        Offering(zone, "reserved", 0.000001, True, count, rid)
        for rid, (zone, count) in sorted(reservations.items())
    )
    reqs = base.requirements.intersect(
        Requirements((Requirement(RID, False, frozenset(reservations)),))
    )
    return replace(base, offerings=(*base.offerings, *extra), requirements=reqs)


def cluster(*types: InstanceType, **kw: object) -> Cluster:
    return b.cluster(types=(*types, *b.catalog()), **kw)  # type: ignore[arg-type]


def run(c: Cluster, pods: list, mode: str = STRICT) -> Results:  # type: ignore[type-arg]
    return solve(c, pods, OPTIONS, reservation_mode=mode)


class TestReservationManager:
    def test_hold_is_idempotent_per_hostname(self) -> None:
        """Holding the same reservation twice for one hostname takes one unit."""
        m = ReservationManager({"cr-1": 2})
        m.hold("h1", frozenset({"cr-1"}))
        m.hold("h1", frozenset({"cr-1"}))
        assert m.remaining == {"cr-1": 1}
        assert m.reservable("h2", ["cr-1"]) == {"cr-1"}

    def test_dropped_reservations_go_back(self) -> None:
        """Narrowing what a hostname holds returns the dropped units to the ledger."""
        m = ReservationManager({"cr-1": 1, "cr-2": 1})
        m.hold("h1", frozenset({"cr-1", "cr-2"}))
        assert m.reservable("h2", ["cr-1", "cr-2"]) == frozenset()
        m.hold("h1", frozenset({"cr-2"}))
        assert m.remaining == {"cr-1": 1, "cr-2": 0}
        assert m.reservable("h2", ["cr-1", "cr-2"]) == {"cr-1"}
        assert m.reservable("h1", ["cr-2"]) == {"cr-2"}

    def test_pools_disagreeing_on_capacity_get_the_smallest(self) -> None:
        """A reservation seen with different counts in two pools starts at the minimum."""
        offers = [
            Offering("zone-a", "reserved", 0.0, True, 3, "cr-1"),
            Offering("zone-a", "reserved", 0.0, True, 1, "cr-1"),
            Offering("zone-a", "on-demand", 1.0),
        ]
        assert ReservationManager.from_offerings(offers).remaining == {"cr-1": 1}

    @pytest.mark.parametrize(
        ("mode", "compatible", "held", "expected"),
        [
            pytest.param(STRICT, {"cr-1"}, set(), UNAVAILABLE_MESSAGE, id="strict-none-free"),
            pytest.param(STRICT, set(), {"cr-1"}, NARROWING_MESSAGE, id="strict-narrowing"),
            pytest.param(STRICT, set(), set(), frozenset(), id="strict-nothing-reserved"),
            pytest.param(FALLBACK, {"cr-1"}, set(), frozenset(), id="fallback-none-free"),
            pytest.param(FALLBACK, set(), {"cr-1"}, frozenset(), id="fallback-narrowing"),
            pytest.param(STRICT, {"cr-1", "cr-2"}, set(), {"cr-2"}, id="strict-some-free"),
        ],
    )
    def test_choose(
        self, mode: str, compatible: set[str], held: set[str], expected: object
    ) -> None:
        """Strict mode refuses when reservations are open but unobtainable; fallback never."""
        r = Reservations(ReservationManager({"cr-1": 0, "cr-2": 1}), mode)
        outcome = r.choose("h", frozenset(compatible), frozenset(held))
        if isinstance(expected, str):
            assert isinstance(outcome, Reject)
            assert (outcome.kind, outcome.detail, outcome.permanent) == (
                "reserved",
                expected,
                False,
            )
        else:
            assert outcome == expected


class TestStrictProvisioning:
    def test_reserved_claim_is_pinned_to_its_reservation(self) -> None:
        """A claim that holds a reservation launches reserved, into that reservation only."""
        c = cluster(reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1)}))
        r = run(c, [b.pod("p", cpu="1500m")])
        [claim] = r.new_claims
        assert (claim.launch.instance_type, claim.launch.zone) == ("r-2x", "zone-a")
        assert (claim.launch.capacity_type, claim.launch.reservation_id) == ("reserved", "cr-a")
        assert claim.requirements.get_or_exists(CT).values == {"reserved"}
        assert claim.requirements.get_or_exists(RID).values == {"cr-a"}
        assert [it.name for it in claim.instance_types] == ["r-2x"]
        assert claim.labels[RID] == "cr-a"
        assert claim.labels[CT] == "reserved"

    def test_exhausted_reservation_defers_without_falling_back(self) -> None:
        """With the only reservation taken, the next pod waits rather than using a lower pool."""
        high = b.nodepool("high", weight=10)
        low = b.nodepool("low", weight=1)
        types = (reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1)}), *b.catalog())
        c = b.cluster([high, low], types=types)
        r = run(c, [b.pod("p1", cpu="1500m"), b.pod("p2", cpu="1500m")])
        assert [(n.nodepool, n.launch.capacity_type) for n in r.new_claims] == [
            ("high", "reserved")
        ]
        assert r.deferred == {"default/p2"}
        assert r.unschedulable["default/p2"] == f"NodePool high: {UNAVAILABLE_MESSAGE}"

    def test_claim_keeps_a_reservation_rather_than_growing_out_of_it(self) -> None:
        """A pod that would push a reserved claim off its reserved type gets its own claim."""
        c = cluster(reserved_type("r-2x", 2, {"cr-a": ("zone-a", 2)}))
        r = run(c, [b.pod("p1", cpu="1500m"), b.pod("p2", cpu="1")])
        assert sorted(len(n.pods) for n in r.new_claims) == [1, 1]
        assert {n.launch.reservation_id for n in r.new_claims} == {"cr-a"}
        assert not r.unschedulable

    def test_narrowed_claim_releases_the_reservation_it_cannot_use(self) -> None:
        """A claim pinned to zone-b by its pod gives cr-a back for the next claim."""
        it = reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1), "cr-b": ("zone-b", 1)})
        zoned = b.pod("zb", cpu="1500m", node_selector={"topology.kubernetes.io/zone": "zone-b"})
        r = run(cluster(it), [zoned, b.pod("any", cpu="1500m")])
        by_pod = {n.pods[0].name: n.launch.reservation_id for n in r.new_claims}
        assert by_pod == {"zb": "cr-b", "any": "cr-a"}

    def test_nodepool_can_require_a_reservation(self) -> None:
        """A NodePool requiring one reservation id never holds the others."""
        it = reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1), "cr-b": ("zone-b", 1)})
        pool = b.nodepool(requirements=b.term((RID, "In", ["cr-b"])))
        r = run(b.cluster([pool], types=(it,)), [b.pod("p", cpu="1500m")])
        [claim] = r.new_claims
        assert claim.launch.reservation_id == "cr-b"
        assert claim.requirements.get_or_exists(RID).values == {"cr-b"}

    def test_one_reservation_is_shared_by_every_nodepool(self) -> None:
        """Two pools offering the same reservation draw on one count for the whole pass."""
        it = reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1)})
        pools = [b.nodepool("a"), b.nodepool("b")]
        c = b.cluster(pools, types=(it, *b.catalog()))
        pods = [
            b.pod("pa", cpu="1500m", node_selector={"karpenter.sh/nodepool": "a"}),
            b.pod("pb", cpu="1500m", node_selector={"karpenter.sh/nodepool": "b"}),
        ]
        r = run(c, pods)
        assert [(n.nodepool, n.launch.reservation_id) for n in r.new_claims] == [("a", "cr-a")]
        assert r.deferred == {"default/pb"}

    def test_pod_that_cannot_use_reserved_capacity_is_unaffected(self) -> None:
        """A spot-only pod never touches reservations and is not deferred."""
        c = cluster(reserved_type("r-2x", 2, {"cr-a": ("zone-a", 0)}))
        r = run(c, [b.pod("p", cpu="1500m", node_selector={CT: "spot"})])
        [claim] = r.new_claims
        assert claim.launch.capacity_type == "spot"
        assert not r.deferred


class TestFallback:
    def test_fallback_launches_unreserved_when_reservations_are_gone(self) -> None:
        """In fallback mode a pod without a free reservation gets ordinary capacity."""
        c = cluster(reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1)}))
        apart = (b.affinity_term("kubernetes.io/hostname", app="x"),)
        pods = [
            b.pod(n, cpu="1500m", labels={"app": "x"}, required_anti_affinity=apart)
            for n in ("p1", "p2")
        ]
        r = run(c, pods, FALLBACK)
        launches = sorted((n.launch.capacity_type, n.launch.reservation_id) for n in r.new_claims)
        assert launches == [("reserved", "cr-a"), ("spot", "")]
        unreserved = next(n for n in r.new_claims if n.launch.capacity_type != "reserved")
        assert "reserved" not in unreserved.requirements.get_or_exists(CT).values
        assert not r.unschedulable

    def test_fallback_claim_may_outgrow_its_reservation(self) -> None:
        """In fallback mode a claim drops its reservation when a pod needs a bigger type."""
        c = cluster(reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1)}))
        r = run(c, [b.pod("p1", cpu="1500m"), b.pod("p2", cpu="1")], FALLBACK)
        [claim] = r.new_claims
        assert len(claim.pods) == 2
        assert claim.launch.capacity_type != "reserved"


class TestLabels:
    def test_unreserved_node_carries_no_reservation_labels(self) -> None:
        """A type's single reservation is not a label of a node launched on-demand on it."""
        it = reserved_type("r-2x", 2, {"cr-a": ("zone-a", 1)})
        options = Options(reservation_id_label=RID, reservation_labels=frozenset({RID}))
        pod = b.pod("p", cpu="1500m", node_selector={CT: "on-demand"})
        r = solve(b.cluster(types=(it,)), [pod], options)
        [claim] = r.new_claims
        assert claim.launch.capacity_type == "on-demand"
        assert RID not in claim.labels
        unstripped = solve(b.cluster(types=(it,)), [pod], OPTIONS)
        assert unstripped.new_claims[0].labels[RID] == "cr-a"  # what the option is there for


class TestDisruption:
    """Disruption's what-ifs run in fallback mode (see ``core/disruption/simulation.py``)."""

    NOW = 1_800_000_000.0

    def _first(self, capacity: int) -> Any:
        pool = b.nodepool(
            requirements=b.term((CT, "In", ["on-demand", "reserved"])),
            disruption=Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("100%"),)),
        )
        m8 = b.catalog()[3]
        node = b.managed_node("big", m8, creation=self.NOW - 3600)
        it = reserved_type("r-2x", 2, {"cr-a": ("zone-a", capacity)})
        c = b.cluster((pool,), types=(it, *b.catalog()), nodes=(node,), pods=(b.bound("big", "p"),))
        command, _ = decide(c, OPTIONS, self.NOW, assume_consolidate_after_elapsed=True)
        return command

    def test_consolidates_into_a_free_reservation(self) -> None:
        """An on-demand node is replaced by reserved capacity when a reservation has room."""
        command = self._first(1)
        assert command is not None
        [replacement] = command.replacements
        assert (replacement.launch.capacity_type, replacement.launch.reservation_id) == (
            "reserved",
            "cr-a",
        )

    def test_full_reservation_does_not_block_the_what_if(self) -> None:
        """With the reservation full, the simulation falls back to on-demand instead of waiting."""
        command = self._first(0)
        assert command is not None
        [replacement] = command.replacements
        assert (replacement.launch.capacity_type, replacement.launch.reservation_id) == (
            "on-demand",
            "",
        )
        assert replacement.launch.instance_type in ("m-2x", "r-2x")  # equal price: both fit
