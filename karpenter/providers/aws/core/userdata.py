"""User data per AMI family: AL2 bootstrap.sh, AL2023 nodeadm NodeConfig, Bottlerocket TOML.

Every family merges the user's ``spec.userData`` with what Karpenter must set (cluster
endpoint and CA, labels, taints, max pods, reserved resources, eviction); Custom passes the
user's data through untouched. The result is the text EC2 receives (base64 is the adapter's).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.scheduling.taints import Taint
from karpenter.providers.aws.core import amifamily
from karpenter.providers.aws.core.capacity import Kubelet

BOUNDARY = "//"
MIME_HEADER = f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{BOUNDARY}"\n'
NODEADM_MARKER = "# Karpenter Generated NodeConfig"


@dataclass(frozen=True, slots=True)
class Options:
    """What the rendered user data must tell the node."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str = ""
    cluster_cidr: str = ""
    cluster_dns: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    max_pods: int | None = None
    kubelet: Kubelet = field(default_factory=Kubelet)  # expressions already resolved
    custom: str = ""
    raid0: bool = False
    # spec.kubelet as written: AL2023 hands every field to nodeadm's kubelet.config
    kubelet_config: Mapping[str, object] = field(default_factory=dict)


def _kv(values: Mapping[str, str], sep: str = "=") -> str:
    return ",".join(f"{k}{sep}{v}" for k, v in sorted(values.items()))


def _taint(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def kubelet_flags(opts: Options) -> list[str]:
    """bootstrap.sh-style kubelet flags (labels sorted, then taints, pods, reserved, eviction,
    image GC, CFS quota)."""
    flags = []
    if opts.labels:
        flags.append(f'--node-labels="{_kv(opts.labels)}"')
    if opts.taints:
        flags.append(f'--register-with-taints="{",".join(_taint(t) for t in opts.taints)}"')
    if opts.max_pods is not None:
        flags.append(f"--max-pods={opts.max_pods}")
    k = opts.kubelet
    if k.pods_per_core:
        flags.append(f"--pods-per-core={k.pods_per_core}")
    if k.system_reserved:
        flags.append(f'--system-reserved="{_kv(k.system_reserved)}"')
    if k.kube_reserved:
        flags.append(f'--kube-reserved="{_kv(k.kube_reserved)}"')
    if k.eviction_hard:
        flags.append(f'--eviction-hard="{_kv(k.eviction_hard, "<")}"')
    return flags + _static_flags(opts.kubelet_config)


def _map(config: Mapping[str, object], key: str) -> dict[str, str]:
    value = config.get(key)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _static_flags(config: Mapping[str, object]) -> list[str]:
    """The managed fields Karpenter passes through unchanged (never expressions)."""
    flags = []
    if soft := _map(config, "evictionSoft"):
        flags.append(f'--eviction-soft="{_kv(soft, "<")}"')
    if grace := _map(config, "evictionSoftGracePeriod"):
        flags.append(f'--eviction-soft-grace-period="{_kv(grace)}"')
    for key, flag in (
        ("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period"),
        ("imageGCHighThresholdPercent", "image-gc-high-threshold"),
        ("imageGCLowThresholdPercent", "image-gc-low-threshold"),
    ):
        if isinstance(config.get(key), int):
            flags.append(f"--{flag}={config[key]}")
    if isinstance(config.get("cpuCFSQuota"), bool):
        flags.append(f"--cpu-cfs-quota={str(config['cpuCFSQuota']).lower()}")
    return flags


def _bottlerocket_static(kube: dict[str, object], config: Mapping[str, object]) -> None:
    for key, setting in (
        ("evictionSoft", "eviction-soft"),
        ("evictionSoftGracePeriod", "eviction-soft-grace-period"),
    ):
        if values := _map(config, key):
            kube[setting] = dict(sorted(values.items()))
    if isinstance(config.get("evictionMaxPodGracePeriod"), int):
        kube["eviction-max-pod-grace-period"] = config["evictionMaxPodGracePeriod"]
    for key, setting in (
        ("imageGCHighThresholdPercent", "image-gc-high-threshold-percent"),
        ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent"),
    ):
        if isinstance(config.get(key), int):
            kube[setting] = str(config[key])  # Bottlerocket takes these as strings
    if isinstance(config.get("cpuCFSQuota"), bool):
        kube["cpu-cfs-quota-enforced"] = config["cpuCFSQuota"]


def _mime(parts: Sequence[tuple[str, str]]) -> str:
    out = [MIME_HEADER]
    for content_type, body in parts:
        out.append(f'\n--{BOUNDARY}\nContent-Type: {content_type}; charset="us-ascii"\n\n{body}\n')
    out.append(f"\n--{BOUNDARY}--\n")
    return "".join(out)


def _custom_parts(custom: str, yaml_type: str) -> list[tuple[str, str]]:
    """The user's data as MIME parts: a MIME archive is split, YAML/shell wrapped."""
    if not custom.strip():
        return []
    if custom.lstrip().startswith("MIME-Version"):
        parts = []
        boundary = (
            custom.split('boundary="', 1)[1].split('"', 1)[0]
            if 'boundary="' in custom
            else BOUNDARY
        )
        for chunk in custom.split(f"--{boundary}")[1:]:
            if chunk.startswith("--"):
                break
            head, _, body = chunk.strip("\n").partition("\n\n")
            ctype = head.split("Content-Type:", 1)[-1].split(";")[0].strip() or "text/x-shellscript"
            parts.append((ctype, body))
        return parts
    looks_yaml = custom.lstrip().startswith(("apiVersion", "---"))
    return [(yaml_type if looks_yaml else "text/x-shellscript", custom)]


def al2(opts: Options) -> str:
    """AL2: the user's parts, then ``/etc/eks/bootstrap.sh`` with Karpenter's flags."""
    script = [
        "#!/bin/bash -xe",
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
        f"/etc/eks/bootstrap.sh '{opts.cluster_name}'"
        f" --apiserver-endpoint '{opts.cluster_endpoint}'"
        f" --b64-cluster-ca '{opts.ca_bundle}' \\",
    ]
    if opts.cluster_dns:
        script.append(f"--dns-cluster-ip '{opts.cluster_dns}' \\")
    if opts.max_pods is not None:
        script.append("--use-max-pods false \\")
    script.append(f"--kubelet-extra-args '{' '.join(kubelet_flags(opts))}'")
    if opts.raid0:
        script[-1] += " \\"
        script.append("--local-disks raid0")
    parts = _custom_parts(opts.custom, "text/x-shellscript")
    return _mime([*parts, ("text/x-shellscript", "\n".join(script))]).replace("\r", "")


def al2023(opts: Options) -> str:
    """AL2023: the user's parts, then a nodeadm NodeConfig (JSON is valid YAML)."""
    k = opts.kubelet
    # the user's fields first; what Karpenter resolves (DNS, max pods, reserved, taints) wins
    config: dict[str, object] = dict(sorted(opts.kubelet_config.items()))
    if k.cluster_dns:
        config["clusterDNS"] = list(k.cluster_dns)  # nodeadm takes them all
    elif opts.cluster_dns:
        config["clusterDNS"] = [opts.cluster_dns]
    config.pop("maxPods", None)  # it may be an expression: only the resolved count is sent
    if opts.max_pods is not None:
        config["maxPods"] = opts.max_pods
    for key, value in (
        ("kubeReserved", k.kube_reserved),
        ("systemReserved", k.system_reserved),
        ("evictionHard", k.eviction_hard),
    ):
        if value:
            config[key] = dict(sorted(value.items()))
    if opts.taints:
        config["registerWithTaints"] = [
            {"key": t.key, "value": t.value, "effect": t.effect}
            if t.value
            else {"key": t.key, "effect": t.effect}
            for t in opts.taints
        ]
    spec: dict[str, object] = {
        "cluster": {
            "apiServerEndpoint": opts.cluster_endpoint,
            "certificateAuthority": opts.ca_bundle,
            "cidr": opts.cluster_cidr,
            "name": opts.cluster_name,
        },
        "kubelet": {
            "config": config,
            "flags": [f'--node-labels="{_kv(opts.labels)}"'] if opts.labels else [],
        },
    }
    if opts.raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    doc = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    body = f"{NODEADM_MARKER}\n{json.dumps(doc, indent=2)}"
    parts = _custom_parts(opts.custom, "application/node.eks.aws")
    return _mime([*parts, ("application/node.eks.aws", body)])


def _table(parent: dict[str, object], key: str) -> dict[str, object]:
    # a user's TOML may hold a scalar where we need a table: ours wins
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def bottlerocket(opts: Options) -> str:
    """Bottlerocket: the user's TOML with Karpenter's kubernetes settings merged over it."""
    try:
        doc: dict[str, object] = tomllib.loads(opts.custom) if opts.custom.strip() else {}
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"spec.userData is not valid TOML: {err}") from None
    settings = _table(doc, "settings")
    kube = _table(settings, "kubernetes")
    kube["cluster-name"] = opts.cluster_name
    kube["api-server"] = opts.cluster_endpoint
    if opts.ca_bundle:
        kube["cluster-certificate"] = opts.ca_bundle
    if opts.cluster_dns:
        kube["cluster-dns-ip"] = opts.cluster_dns
    if opts.max_pods is not None:
        kube["max-pods"] = opts.max_pods
    existing = kube.get("node-labels")
    labels = {str(k): str(v) for k, v in existing.items()} if isinstance(existing, dict) else {}
    labels.update(opts.labels)
    if labels:
        kube["node-labels"] = dict(sorted(labels.items()))
    taints: dict[str, list[str]] = {}
    for t in opts.taints:
        taints.setdefault(t.key, []).append(f"{t.value}:{t.effect}")
    kube["node-taints"] = taints
    k = opts.kubelet
    for key, value in (
        ("kube-reserved", k.kube_reserved),
        ("system-reserved", k.system_reserved),
        ("eviction-hard", k.eviction_hard),
    ):
        if value:
            kube[key] = dict(sorted(value.items()))
    _bottlerocket_static(kube, opts.kubelet_config)
    if opts.raid0:
        boot = _table(settings, "bootstrap-commands")
        boot["000-mount-instance-storage"] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                ["apiclient", "ephemeral-storage", "bind"],
            ],
            "mode": "always",
            "essential": True,
        }
    return dump_toml(doc)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{"
            + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items())
            + "}"
        )
    return json.dumps(str(value))


def _toml_key(key: str) -> str:
    bare = key.replace("-", "").replace("_", "").isalnum()
    return key if bare else json.dumps(key)


def dump_toml(doc: Mapping[str, object], prefix: str = "") -> str:
    """Minimal TOML writer: scalars and arrays inline, every mapping as its own [table]."""
    lines = [
        f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, Mapping)
    ]
    for key, value in doc.items():
        if isinstance(value, Mapping):
            name = f"{prefix}{_toml_key(key)}"
            lines.append(f"\n[{name}]")
            body = dump_toml(value, f"{name}.")
            if body:
                lines.append(body)
    return "\n".join(lines).strip("\n") + ("\n" if not prefix else "")


def render(family: str, opts: Options) -> str:
    """The user data of a family."""
    if family == amifamily.CUSTOM:
        return opts.custom
    if family == amifamily.AL2:
        return al2(opts)
    if family == amifamily.BOTTLEROCKET:
        return bottlerocket(opts)
    if family in amifamily.WINDOWS:
        args = f"-KubeletExtraArgs '{' '.join(kubelet_flags(opts))}'"
        return (
            f"<powershell>\n{opts.custom}\n"
            "[string]$EKSBootstrapScriptFile = "
            '"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"\n'
            f"& $EKSBootstrapScriptFile -EKSClusterName '{opts.cluster_name}' -APIServerEndpoint "
            f"'{opts.cluster_endpoint}' -Base64ClusterCA '{opts.ca_bundle}' {args} "
            f"-DNSClusterIP '{opts.cluster_dns}'\n</powershell>"
        )
    return al2023(opts)
