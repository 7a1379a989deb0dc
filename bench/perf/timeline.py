"""The timeline of one scale-out: where the seconds between "pods created" and "all Running" go.

Read from the apiserver after the phase (the objects keep their timestamps) and, for our
controller, from its log: per pod, when it was created, first reported unschedulable by the
kube-scheduler (its ``FailedScheduling`` Event), nominated by the controller (``Nominated``),
when the NodeClaim meant for it was created, launched and registered, when that claim's Node
was created and turned Ready, when the pod was bound (``PodScheduled``) and when it turned
Ready (Running). Each stage prints as offsets from the phase start (p50 / p90 / max) and as
the step from the stage before it, plus how many pods were bound to another node than the one
their nomination planned, and the provisioner's passes (time, pods, claims, wait/solve/write).
Object timestamps have whole seconds; Events' ``eventTime`` and the log have microseconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from karpenter.kube import client as kc
from karpenter.kube import codec

STAGES = (
    "created",
    "unschedulable",
    "nominated",
    "claim_created",
    "claim_launched",
    "node_created",
    "node_ready",
    "claim_registered",
    "bound",
    "running",
)


@dataclass
class Timeline:
    """Per pod, the moment of each stage (seconds since the phase start)."""

    pods: dict[str, dict[str, float]] = field(default_factory=dict)
    bound_elsewhere: int = 0
    passes: list[dict[str, Any]] = field(default_factory=list)
    writes: dict[str, int] = field(default_factory=dict)

    def table(self) -> str:
        """Markdown: stage, then p50 / p90 / max since start, and the step from the stage
        before (p50 / p90 / max), over the pods that have both."""
        lines = [
            "| stage | pods | since start p50 / p90 / max s | step p50 / p90 / max s |",
            "|---|---|---|---|",
        ]
        prev = ""
        for stage in STAGES:
            at = [p[stage] for p in self.pods.values() if stage in p]
            steps = [p[stage] - p[prev] for p in self.pods.values() if stage in p and prev in p]
            lines.append(f"| {stage} | {len(at)} | {_pct(at)} | {_pct(steps) if prev else ''} |")
            prev = stage
        lines.append(f"\npods bound to another node than nominated: {self.bound_elsewhere}")
        if self.passes:
            lines.append("\n| pass at s | pods | claims | wait_s | solve_s | write_s |")
            lines.append("|---|---|---|---|---|---|")
            for p in self.passes:
                lines.append(
                    f"| {p['at']:.1f} | {p['pods']} | {p['nodeclaims']} | {p['wait_s']} "
                    f"| {p['solve_s']} | {p['write_s']} |"
                )
        if self.writes:
            lines.append("\n| writer verb resource | requests |\n|---|---|")
            for key, count in sorted(self.writes.items(), key=lambda kv: -kv[1])[:25]:
                lines.append(f"| {key} | {count} |")
        return "\n".join(lines)


def _pct(values: Sequence[float]) -> str:
    if not values:
        return "–"
    ordered = sorted(values)

    def q(f: float) -> float:
        return ordered[min(len(ordered) - 1, int(f * len(ordered)))]

    return f"{q(0.5):.1f} / {q(0.9):.1f} / {ordered[-1]:.1f}"


def _when(stamp: object) -> float | None:
    return codec.parse_time(str(stamp)) if stamp else None


def _cond_time(obj: kc.Obj, kind: str) -> float | None:
    for cond in codec.conditions(obj):
        if cond.get("type") == kind and cond.get("status") == "True":
            return _when(cond.get("lastTransitionTime"))
    return None


def _first_events(items: Sequence[kc.Obj]) -> dict[tuple[str, str], tuple[float, str]]:
    """(reason, pod name) → (earliest time, message) of that pod's Events with the reason."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for ev in items:
        pod = (ev.get("involvedObject") or ev.get("regarding") or {}).get("name", "")
        reason = str(ev.get("reason", ""))
        at = _when(ev.get("eventTime")) or _when(ev.get("firstTimestamp"))
        if at is None:
            continue
        key = (reason, pod)
        if key not in out or at < out[key][0]:
            out[key] = (at, str(ev.get("message", "")))
    return out


@dataclass
class Audit:
    """What the apiserver's audit log says about pods and Nodes (microsecond times)."""

    unschedulable: dict[str, float] = field(default_factory=dict)  # first scheduler status
    bound: dict[str, float] = field(default_factory=dict)  # pods/binding
    node_created: dict[str, float] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)  # "user verb resource" → count


def read_audit(path: Path) -> Audit:
    """Scheduler status writes, bindings and Node creations from the audit log."""
    out = Audit()
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        ref = ev.get("objectRef") or {}
        user = str((ev.get("user") or {}).get("username", "")).rsplit(":", 1)[-1]
        resource = "/".join(x for x in (ref.get("resource"), ref.get("subresource")) if x)
        key = f"{user} {ev.get('verb')} {resource}"
        out.writes[key] = out.writes.get(key, 0) + 1
        at = _when(ev.get("stageTimestamp"))
        name = str(ref.get("name") or "")
        if at is None or not name or (ev.get("responseStatus") or {}).get("code", 200) >= 300:
            continue
        if resource == "pods/status" and user == "kube-scheduler":
            out.unschedulable.setdefault(name, at)
        elif resource == "pods/binding":
            out.bound.setdefault(name, at)
        elif resource == "nodes" and ev.get("verb") == "create":
            out.node_created.setdefault(name, at)
    return out


def _claim_created(log: Path | None) -> dict[str, float]:
    out: dict[str, float] = {}
    if log is None or not log.exists():
        return out
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"created nodeclaim"' in line:
            entry = json.loads(line)
            at = _when(entry.get("time"))
            if at is not None:
                out[str(entry.get("nodeclaim"))] = at
    return out


async def collect(
    kube: kc.KubeClient,
    started: float,
    namespace: str,
    log: Path | None = None,
    audit_log: Path | None = None,
) -> Timeline:
    """The timeline of the pods in ``namespace`` since ``started`` (wall clock)."""
    pods, _ = await kube.list(kc.PODS, namespace=namespace)
    claims, _ = await kube.list(kc.NODECLAIMS)
    nodes, _ = await kube.list(kc.NODES)
    evs, _ = await kube.list(kc.EVENTS, namespace=namespace)
    first = _first_events(evs)
    by_claim = {codec.name(c): c for c in claims}
    by_node = {codec.name(n): n for n in nodes}
    audit, created_at, passes = _files(log, audit_log, started)
    out = Timeline(writes=audit.writes)
    for pod in pods:
        name = codec.name(pod)
        t: dict[str, float | None] = {"created": _when(codec.meta(pod).get("creationTimestamp"))}
        t["unschedulable"] = (
            audit.unschedulable.get(name) or first.get(("FailedScheduling", name), (None, ""))[0]
        )
        nominated = first.get(("Nominated", name))
        # the claim planned for the pod: its Nominated Event (sampled, 5/s as upstream's), or
        # else the nomination published at registration (the simulated cloud names a claim's
        # Node after the claim; the scheduler keeps the field on the pod once bound)
        target = str((pod.get("status") or {}).get("nominatedNodeName") or "")
        if nominated is not None:
            t["nominated"] = nominated[0]
            target = nominated[1].rsplit("/", 1)[-1]
        claim = by_claim.get(target)
        if claim is not None:
            t["claim_created"] = created_at.get(target) or _when(
                codec.meta(claim).get("creationTimestamp")
            )
            t["claim_launched"] = _cond_time(claim, "Launched")
            t["claim_registered"] = _cond_time(claim, "Registered")
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        node = by_node.get(node_name)
        if node is not None:
            t["node_created"] = audit.node_created.get(node_name) or _when(
                codec.meta(node).get("creationTimestamp")
            )
            t["node_ready"] = _cond_time(node, "Ready")
        planned = str(((claim or {}).get("status") or {}).get("nodeName") or target)
        if node_name and target and node_name != planned:
            out.bound_elsewhere += 1
        t["bound"] = audit.bound.get(name) or _cond_time(pod, "PodScheduled")
        t["running"] = _cond_time(pod, "Ready")
        out.pods[name] = {k: v - started for k, v in t.items() if v is not None}
    out.passes = passes
    return out


def _files(
    log: Path | None, audit_log: Path | None, started: float
) -> tuple[Audit, dict[str, float], list[dict[str, Any]]]:
    audit = read_audit(audit_log) if audit_log is not None else Audit()
    passes = _passes(log, started) if log is not None and log.exists() else []
    return audit, _claim_created(log), passes


def _passes(log: Path, started: float) -> list[dict[str, Any]]:
    rows = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"provisioning pass"' not in line:
            continue
        try:
            entry: Mapping[str, Any] = json.loads(line)
        except ValueError:
            continue
        at = _when(entry.get("time"))
        if at is None or at < started:
            continue
        rows.append({**entry, "at": at - started})
    return rows
