"""kwok next to the local control plane: the kubelet of every simulated Node.

kwok (Kubernetes WithOut Kubelet, sigs.k8s.io/kwok) watches the Nodes that match a selector and
the pods bound to them, and plays their kubelet through *Stages*: a matching Node turns Ready
(keeping the capacity its creator wrote), a pod bound to it turns ``Running`` with a pod IP,
host IP, container statuses and the Initialized/Ready/ContainersReady conditions, a Job's pod
completes, and a deleted pod disappears at its ``deletionTimestamp`` — which the apiserver sets
to the deletion time plus the pod's grace period, so ``terminationGracePeriodSeconds`` is
honoured as a kubelet would. An agent on the Node (a Stage too) removes the startup taints the
Node's creator listed in the ``AGENT_TAINTS`` annotation, after ``AGENT_DELAY``, as a CNI or
CSI agent removes its "not ready" taint once it runs.

kwok only adopts Nodes carrying ``NODE_ANNOTATION`` (upstream's kwok provider and this
project's simulated cloud both set it), so Nodes a test creates by hand stay untouched.

Using it (also in hack/README.md): ``ensure_kwok()`` builds or finds the binary;
``LocalControlPlane(bin_dir, kwok=KwokOptions(ensure_kwok()))`` starts it with the control plane
and stops it first; ``stages()`` returns the Stage documents it runs with.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from karpenter.core.model import labels as lbl

__all__ = ["KwokError", "KwokOptions", "ensure_kwok", "stages"]

_REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = _REPO_ROOT / "hack" / "build-kwok.sh"
NODE_ANNOTATION = lbl.KWOK_NODE
# Startup taints an agent on the Node removes (comma-separated keys), and after how long
# (a Go duration such as "2s"); the first annotation goes away with the taints.
AGENT_TAINTS = lbl.AGENT_TAINTS
AGENT_DELAY = lbl.AGENT_DELAY
# Pod IPs come from here; kwok's default /24 runs out after 254 pods.
POD_CIDR = "10.128.0.0/9"


class KwokError(RuntimeError):
    """kwok could not be built or started; the message names what, why and where."""


@dataclass(frozen=True)
class KwokOptions:
    """How to run kwok beside a control plane."""

    bin_dir: Path
    annotation_selector: str = f"{NODE_ANNOTATION[0]}={NODE_ANNOTATION[1]}"
    label_selector: str = ""
    # How long a bound pod takes to start (image pull + container start), in milliseconds.
    pod_start_ms: int = 0
    extra_stages: Sequence[Mapping[str, Any]] = field(default_factory=tuple)

    @property
    def binary(self) -> Path:
        return self.bin_dir / "kwok"

    def args(self, kubeconfig: Path, config: Path, server_port: int) -> list[str]:
        """The command line (selectors, stages file, pod CIDR, health endpoint)."""
        args = [
            str(self.binary),
            f"--kubeconfig={kubeconfig}",
            f"--config={config}",
            f"--cidr={POD_CIDR}",
            f"--server-address=127.0.0.1:{server_port}",
        ]
        if self.annotation_selector:
            args.append(f"--manage-nodes-with-annotation-selector={self.annotation_selector}")
        if self.label_selector:
            args.append(f"--manage-nodes-with-label-selector={self.label_selector}")
        return args

    def config_text(self) -> str:
        """kwok's --config file: its options and the Stage documents, JSON being YAML."""
        options = {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokConfiguration",
            # kwok plays 4 stages at a time by default: a 1000-pod burst would queue behind it
            "options": {"podPlayStageParallelism": 16, "nodePlayStageParallelism": 8},
        }
        docs = [options, *stages(self.pod_start_ms), *self.extra_stages]
        return "\n---\n".join(json.dumps(d, indent=1) for d in docs) + "\n"


def ensure_kwok(timeout_s: float = 1800.0) -> Path:
    """The directory holding the kwok binary, built by ``hack/build-kwok.sh`` when missing.

    ``KARPENTER_KWOK_BIN_DIR`` points at a prebuilt one instead. A failure raises KwokError
    with the build script's one-line reason (which names the cache path); it never hangs.
    """
    override = os.environ.get("KARPENTER_KWOK_BIN_DIR")
    if override:
        return _checked(Path(override))
    try:
        proc = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise KwokError(f"kwok: {BUILD_SCRIPT} did not finish within {timeout_s:.0f}s") from None
    except OSError as err:
        raise KwokError(f"kwok: cannot run {BUILD_SCRIPT}: {err}") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise KwokError(lines[-1] if lines else f"kwok: {BUILD_SCRIPT} failed")
    out = proc.stdout.strip().splitlines()
    if not out:
        raise KwokError(f"kwok: {BUILD_SCRIPT} printed no bin dir")
    return _checked(Path(out[-1]))


def _checked(bin_dir: Path) -> Path:
    if not os.access(bin_dir / "kwok", os.X_OK):
        raise KwokError(f"kwok: no executable kwok in {bin_dir}")
    return bin_dir


# ---- Stages ---------------------------------------------------------------------------------


def _stage(name: str, kind: str, selector: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": kind},
            "selector": {"matchExpressions": selector},
            **spec,
        },
    }


_NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
_READY_STATUS = '.status.conditions.[] | select( .type == "Ready" ) | .status'

# Ready with kwok's default condition set; capacity and allocatable are kept as written (a
# Node without them keeps none: kwok must never invent its 1000-CPU default).
_NODE_READY = """\
{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $since | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with .status.addresses }}
{{ YAML . 1 }}
{{ else }}
- address: {{ NodeIP | Quote }}
  type: InternalIP
- address: {{ .metadata.name | Quote }}
  type: Hostname
{{ end }}
{{ $info := .status.nodeInfo }}
{{ $version := printf "kwok-%s" Version }}
nodeInfo:
  architecture: {{ or $info.architecture "amd64" }}
  operatingSystem: {{ or $info.operatingSystem "linux" }}
  kubeletVersion: {{ or $info.kubeletVersion $version }}
  kubeProxyVersion: {{ or $info.kubeProxyVersion $version }}
  containerRuntimeVersion: {{ or $info.containerRuntimeVersion $version }}
  kernelVersion: {{ or $info.kernelVersion $version }}
  bootID: {{ or $info.bootID `""` }}
  machineID: {{ or $info.machineID `""` }}
  osImage: {{ or $info.osImage `""` }}
  systemUUID: {{ or $info.systemUUID `""` }}
phase: Running
"""

# JSON-patch ops removing, last index first, each taint whose key the agent owns; a ``test`` op
# before every removal makes the patch fail (and kwok retry) if the list changed meanwhile, so a
# concurrent write (Karpenter removing its unregistered taint) is never undone.
_AGENT_PATCH = """\
{{ $owned := splitList "," (index .metadata.annotations "%s") }}
{{ $taints := .spec.taints | default (list) }}
{{ $n := len $taints }}
[
{{ range $i := until $n }}{{ $at := sub $n (add $i 1) }}{{ $t := index $taints $at }}
{{ if has $t.key $owned }}
{"op": "test", "path": "/spec/taints/{{ $at }}/key", "value": {{ $t.key | toJson }}},
{"op": "remove", "path": "/spec/taints/{{ $at }}"},
{{ end }}{{ end }}
{"op": "remove", "path": "/metadata/annotations/%s"}
]
"""

_POD_RUNNING = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""

_POD_SUCCEEDED = """\
{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
"""


def stages(pod_start_ms: int = 0) -> list[dict[str, Any]]:
    """The Stage documents: Node ready, node agent, pod running, Job pod done, pod deleted."""
    return [
        _stage(
            "node-ready",
            "Node",
            # Only a Node that never reported Ready: one a test (or chaos) marked NotReady stays so.
            [{"key": _READY_STATUS, "operator": "DoesNotExist"}],
            next={"statusTemplate": _NODE_READY},
        ),
        _stage(
            "node-agent-removes-startup-taints",
            "Node",
            [
                {"key": f'.metadata.annotations["{AGENT_TAINTS}"]', "operator": "Exists"},
                {"key": _READY_STATUS, "operator": "In", "values": ["True"]},
            ],
            delay={
                "durationMilliseconds": 0,
                "durationFrom": {"expressionFrom": f'.metadata.annotations["{AGENT_DELAY}"]'},
            },
            next={
                "patches": [
                    {
                        "type": "json",
                        "template": _AGENT_PATCH % (AGENT_TAINTS, AGENT_TAINTS.replace("/", "~1")),
                    }
                ]
            },
        ),
        _stage(
            "pod-running",
            "Pod",
            [_NOT_DELETING, {"key": ".status.podIP", "operator": "DoesNotExist"}],
            delay={"durationMilliseconds": pod_start_ms},
            next={"statusTemplate": _POD_RUNNING},
        ),
        _stage(
            "pod-job-succeeded",
            "Pod",
            [
                _NOT_DELETING,
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
            ],
            delay={"durationMilliseconds": 1000},
            next={"statusTemplate": _POD_SUCCEEDED},
        ),
        # The apiserver sets deletionTimestamp to the deletion time plus the grace period: the
        # pod goes at that moment, as a kubelet removes it once its containers are stopped.
        _stage(
            "pod-deleted-after-grace",
            "Pod",
            [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            delay={
                "durationMilliseconds": 0,
                "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
            },
            next={"delete": True},
        ),
    ]
