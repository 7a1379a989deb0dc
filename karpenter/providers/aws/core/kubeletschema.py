"""The shape of upstream's ``KubeletConfiguration`` (k8s.io/kubelet ``config/v1beta1``).

``spec.kubelet`` is an open map (the CRD preserves unknown fields), so the apiserver checks
nothing in it; upstream decodes it strictly into the kubelet's own Go type instead. This
table is that type's top-level fields with the JSON kind each decodes from, and ``decode``
reports what a strict decode would: unknown fields and values of the wrong kind. Nested
objects (``authentication``, ``logging``, ``tracing``...) are only checked to be objects:
the kubelet's own sub-structs are out of Karpenter's reach and rarely set here.
"""

from __future__ import annotations

from collections.abc import Mapping

from karpenter.core.model.duration import parse_go_duration

# JSON kinds: the Go field types they stand for
BOOL, INT, FLOAT, STR, DURATION = "bool", "int32", "float64", "string", "v1.Duration"
STR_LIST, LIST, OBJECT = "[]string", "[]object", "object"
STR_MAP, BOOL_MAP = "map[string]string", "map[string]bool"

_FIELDS: dict[str, str] = {
    "kind": STR,
    "apiVersion": STR,
    "enableServer": BOOL,
    "staticPodPath": STR,
    "podLogsDir": STR,
    "syncFrequency": DURATION,
    "fileCheckFrequency": DURATION,
    "httpCheckFrequency": DURATION,
    "staticPodURL": STR,
    "staticPodURLHeader": OBJECT,
    "address": STR,
    "port": INT,
    "readOnlyPort": INT,
    "tlsCertFile": STR,
    "tlsPrivateKeyFile": STR,
    "tlsCipherSuites": STR_LIST,
    "tlsMinVersion": STR,
    "rotateCertificates": BOOL,
    "serverTLSBootstrap": BOOL,
    "authentication": OBJECT,
    "authorization": OBJECT,
    "registryPullQPS": INT,
    "registryBurst": INT,
    "imagePullCredentialsVerificationPolicy": STR,
    "preloadedImagesVerificationAllowlist": STR_LIST,
    "eventRecordQPS": INT,
    "eventBurst": INT,
    "enableDebuggingHandlers": BOOL,
    "enableContentionProfiling": BOOL,
    "healthzPort": INT,
    "healthzBindAddress": STR,
    "oomScoreAdj": INT,
    "clusterDomain": STR,
    "clusterDNS": STR_LIST,
    "streamingConnectionIdleTimeout": DURATION,
    "nodeStatusUpdateFrequency": DURATION,
    "nodeStatusReportFrequency": DURATION,
    "nodeLeaseDurationSeconds": INT,
    "imageMinimumGCAge": DURATION,
    "imageMaximumGCAge": DURATION,
    "imageGCHighThresholdPercent": INT,
    "imageGCLowThresholdPercent": INT,
    "volumeStatsAggPeriod": DURATION,
    "kubeletCgroups": STR,
    "systemCgroups": STR,
    "cgroupRoot": STR,
    "cgroupsPerQOS": BOOL,
    "cgroupDriver": STR,
    "cpuManagerPolicy": STR,
    "singleProcessOOMKill": BOOL,
    "cpuManagerPolicyOptions": STR_MAP,
    "cpuManagerReconcilePeriod": DURATION,
    "memoryManagerPolicy": STR,
    "topologyManagerPolicy": STR,
    "topologyManagerScope": STR,
    "topologyManagerPolicyOptions": STR_MAP,
    "qosReserved": STR_MAP,
    "runtimeRequestTimeout": DURATION,
    "hairpinMode": STR,
    "maxPods": INT,
    "podCIDR": STR,
    "podPidsLimit": INT,
    "resolvConf": STR,
    "runOnce": BOOL,
    "cpuCFSQuota": BOOL,
    "cpuCFSQuotaPeriod": DURATION,
    "nodeStatusMaxImages": INT,
    "maxOpenFiles": INT,
    "contentType": STR,
    "kubeAPIQPS": INT,
    "kubeAPIBurst": INT,
    "serializeImagePulls": BOOL,
    "maxParallelImagePulls": INT,
    "evictionHard": STR_MAP,
    "evictionSoft": STR_MAP,
    "evictionSoftGracePeriod": STR_MAP,
    "evictionPressureTransitionPeriod": DURATION,
    "evictionMaxPodGracePeriod": INT,
    "evictionMinimumReclaim": STR_MAP,
    "mergeDefaultEvictionSettings": BOOL,
    "podsPerCore": INT,
    "enableControllerAttachDetach": BOOL,
    "protectKernelDefaults": BOOL,
    "makeIPTablesUtilChains": BOOL,
    "iptablesMasqueradeBit": INT,
    "iptablesDropBit": INT,
    "featureGates": BOOL_MAP,
    "failSwapOn": BOOL,
    "memorySwap": OBJECT,
    "containerLogMaxSize": STR,
    "containerLogMaxFiles": INT,
    "containerLogMaxWorkers": INT,
    "containerLogMonitorInterval": DURATION,
    "configMapAndSecretChangeDetectionStrategy": STR,
    "systemReserved": STR_MAP,
    "kubeReserved": STR_MAP,
    "reservedSystemCPUs": STR,
    "showHiddenMetricsForVersion": STR,
    "systemReservedCgroup": STR,
    "kubeReservedCgroup": STR,
    "enforceNodeAllocatable": STR_LIST,
    "allowedUnsafeSysctls": STR_LIST,
    "volumePluginDir": STR,
    "providerID": STR,
    "kernelMemcgNotification": BOOL,
    "logging": OBJECT,
    "enableSystemLogHandler": BOOL,
    "enableSystemLogQuery": BOOL,
    "shutdownGracePeriod": DURATION,
    "shutdownGracePeriodCriticalPods": DURATION,
    "shutdownGracePeriodByPodPriority": LIST,
    "crashLoopBackOff": OBJECT,
    "reservedMemory": LIST,
    "enableProfilingHandler": BOOL,
    "enableDebugFlagsHandler": BOOL,
    "seccompDefault": BOOL,
    "memoryThrottlingFactor": FLOAT,
    "registerWithTaints": LIST,
    "registerNode": BOOL,
    "tracing": OBJECT,
    "localStorageCapacityIsolation": BOOL,
    "containerRuntimeEndpoint": STR,
    "imageServiceEndpoint": STR,
    "failCgroupV1": BOOL,
    "userNamespaces": OBJECT,
}
FIELDS: Mapping[str, str] = _FIELDS
_INT32 = 2**31


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _fits(kind: str, value: object) -> bool:
    if value is None:
        return True  # JSON null leaves a Go field at its zero value
    if kind == BOOL:
        return isinstance(value, bool)
    if kind == INT:
        return type(value) is int and -_INT32 <= value < _INT32
    if kind == FLOAT:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in (STR, DURATION):
        return isinstance(value, str)
    if kind == STR_LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == LIST:
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    if kind == STR_MAP:
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if kind == BOOL_MAP:
        return isinstance(value, dict) and all(isinstance(v, bool) for v in value.values())
    return isinstance(value, dict)


def decode(config: Mapping[str, object]) -> list[str]:
    """What a strict decode into ``KubeletConfiguration`` rejects, in key order.

    Wording follows Go's decoder (``unknown field "x"``, ``cannot unmarshal string into Go
    struct field KubeletConfiguration.port of type int32``) so the messages read as upstream's.
    """
    problems = []
    for key in sorted(config):
        value = config[key]
        kind = _FIELDS.get(key)
        if kind is None:
            problems.append(f'unknown field "{key}"')
        elif not _fits(kind, value):
            problems.append(
                f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                f"KubeletConfiguration.{key} of type {kind}"
            )
        elif kind == DURATION and isinstance(value, str):
            try:
                parse_go_duration(value)
            except ValueError:
                problems.append(f"time: invalid duration {value!r} in {key}")
    return problems
