"""A local Kubernetes control plane (etcd + apiserver + scheduler + controller-manager) for tests.

`LocalControlPlane` runs the real upstream binaries built by `hack/build-controlplane.sh` as
child processes on loopback ports, with a throwaway PKI, so end-to-end tests talk to a genuine
apiserver (CRD schema validation, CEL rules, defaulting, watches) and a genuine kube-scheduler.
There are no kubelets. With ``kwok=KwokOptions(...)`` a kwok process plays the kubelet of every
Node carrying kwok's annotation (see ``sandbox/kwok.py``); other Nodes stay as their creator
wrote them. ``client_rate=ClientRate(qps, burst)`` raises the scheduler's and the
controller-manager's client rate limits, as production clusters do (stock: 50/100 and 20/30).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from karpenter.sandbox import build
from karpenter.sandbox import kwok as kwok_mod
from karpenter.sandbox.pki import KeyPair, Pki, kubeconfig

__all__ = [
    "PRODUCTION_CLIENT_RATE",
    "ClientRate",
    "ControlPlaneError",
    "LocalControlPlane",
    "ensure_binaries",
]

_REPO_ROOT = Path(__file__).resolve().parents[2]
_BUILD_SCRIPT = _REPO_ROOT / "hack" / "build-controlplane.sh"
_SERVICE_CIDR = "10.0.0.0/24"
# The first address of the service range is the in-cluster `kubernetes` Service; the serving
# certificate names it so in-cluster style clients would also verify.
_KUBERNETES_SERVICE_IP = "10.0.0.1"
_STOP_GRACE_S = 10.0
_APISERVER_STOP_GRACE_S = 3.0
_BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message carries the log tail."""


@dataclass(frozen=True)
class ClientRate:
    """Client QPS and burst of kube-scheduler and kube-controller-manager."""

    qps: float
    burst: int

    def args(self) -> list[str]:
        return [f"--kube-api-qps={self.qps:g}", f"--kube-api-burst={self.burst}"]


# What large production clusters run with (the stock defaults pace a 1000-pod burst at 20 QPS).
PRODUCTION_CLIENT_RATE = ClientRate(300.0, 600)


def ensure_binaries(timeout_s: float = 3600.0, progress: build.Progress | None = None) -> Path:
    """Return the directory holding the control-plane binaries, building them if needed.

    The build script is idempotent and exits at once when its cache is warm, so calling this
    every session is cheap. Failures raise, never skip: a test run that cannot build its
    control plane must go red. With ``progress``, the build's steps are reported as they
    happen (elapsed time, what is being built, the cache path), for a person waiting on it.
    """
    override = os.environ.get("KARPENTER_CONTROLPLANE_BIN_DIR")
    if override:
        return _checked_bin_dir(Path(override))
    if not _BUILD_SCRIPT.is_file():
        raise ControlPlaneError(f"build script not found at {_BUILD_SCRIPT}")
    proc: build.Outcome | subprocess.CompletedProcess[str]
    if progress is not None:
        proc = build.run(_BUILD_SCRIPT, progress, timeout_s=timeout_s)
    else:
        proc = subprocess.run(
            ["bash", str(_BUILD_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"{_BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{_tail(proc.stderr)}"
        )
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise ControlPlaneError(f"{_BUILD_SCRIPT} printed no bin dir:\n{_tail(proc.stderr)}")
    return _checked_bin_dir(Path(lines[-1]))


def _checked_bin_dir(bin_dir: Path) -> Path:
    missing = [b for b in _BINARIES if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{bin_dir} lacks executables: {', '.join(missing)}")
    return bin_dir


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    # Binding port 0 lets the kernel choose; the tiny race until the child binds it is acceptable
    # for tests and avoids fixed ports that collide between parallel sessions.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- processes -------------------------------------------------------------------------------


@dataclass
class _Process:
    name: str
    args: list[str]
    log: Path
    grace_s: float = _STOP_GRACE_S
    popen: subprocess.Popen[bytes] | None = field(default=None)

    def start(self) -> None:
        with self.log.open("ab") as out:
            # A new session puts the child in its own process group so a Ctrl-C aimed at pytest
            # does not race our orderly shutdown, and so stop() can signal the whole group.
            self.popen = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self) -> None:
        proc, self.popen = self.popen, None
        if proc is None or proc.poll() is not None:
            return
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=_STOP_GRACE_S)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return f"--- last lines of {self.log} ---\n{_tail(text, lines)}"


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


class LocalControlPlane:
    """etcd, kube-apiserver, kube-scheduler and (optionally) kube-controller-manager on loopback.

    Use as a context manager, or call `start()` / `stop()`. After `start()`, `kubeconfig` is an
    admin (system:masters) kubeconfig and `server` the apiserver URL.
    """

    def __init__(
        self,
        bin_dir: Path,
        work_dir: Path | None = None,
        *,
        scheduler: bool = True,
        controller_manager: bool = True,
        startup_timeout_s: float = 120.0,
        audit_policy: str = "",
        kwok: kwok_mod.KwokOptions | None = None,
        client_rate: ClientRate | None = None,
    ) -> None:
        self.bin_dir = bin_dir
        # An audit Policy (YAML); when set the apiserver logs JSON events to ``audit_log``.
        self._audit_policy = audit_policy
        self._own_work_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="karpenter-controlplane-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._with_scheduler = scheduler
        self._with_controller_manager = controller_manager
        self._startup_timeout_s = startup_timeout_s
        self.kwok = kwok
        self.client_rate = client_rate
        self.etcd_port = _free_port()
        self.apiserver_port = _free_port()
        self.scheduler_port = _free_port()  # its HTTPS /metrics (bench/perf reads the queue)
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        self.kubeconfig = self.work_dir / "admin.kubeconfig"
        self._etcd_data = self.work_dir / "etcd-data"
        self._processes: dict[str, _Process] = {}
        self._pki: Pki | None = None
        self._admin: KeyPair | None = None
        self._sa_private = self.work_dir / "pki" / "sa.key"
        self._sa_public = self.work_dir / "pki" / "sa.pub"
        self.audit_log = self.work_dir / "logs" / "audit.jsonl"

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> LocalControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start every component and wait until the apiserver reports ready."""
        # A crashed test run must not leave daemons behind holding ports.
        atexit.register(self.stop)
        try:
            self._write_pki()
            self._start_etcd()
            self._start_apiserver()
            if self._with_scheduler:
                self._start_component("kube-scheduler", self._scheduler_args())
            if self._with_controller_manager:
                self._start_component("kube-controller-manager", self._controller_manager_args())
            if self.kwok is not None:
                self._start_kwok(self.kwok)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate all components (SIGTERM, then SIGKILL) and delete the etcd data."""
        for name in ("kwok", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd"):
            proc = self._processes.get(name)
            if proc is not None:
                proc.stop()
        shutil.rmtree(self._etcd_data, ignore_errors=True)
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        atexit.unregister(self.stop)

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver on the same port; etcd and its data are kept.

        Open watches are cut, as in a real restart. The new apiserver's watch cache starts at the
        current revision, so resuming a watch from an older resourceVersion gets 410 Gone; clients
        must relist, exactly as informers do against a real cluster.
        """
        proc = self._processes["kube-apiserver"]
        proc.stop()
        proc.start()
        self._wait_apiserver_ready(proc)

    def kubeconfig_for(self, user: str, organization: str = "system:masters") -> Path:
        """A kubeconfig authenticating as ``user`` (client certificate, group ``organization``):
        distinct users tell replicas apart in the audit log."""
        assert self._pki is not None
        pair = self._pki.issue(f"user-{user}", user, organization=organization)
        path = self.work_dir / f"{user}.kubeconfig"
        path.write_text(kubeconfig(self.server, self._pki.ca.cert, pair, user))
        return path

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision (through etcd's HTTP gateway) and return it:
        every watch resuming from an older resourceVersion then gets 410 Gone."""
        base = f"http://127.0.0.1:{self.etcd_port}/v3/kv"
        # any range answers with the store's header revision; "AA==" is the key b"\0"
        head = _post_json(f"{base}/range", {"key": "AA=="})
        revision = int(head["header"]["revision"])
        _post_json(f"{base}/compaction", {"revision": revision, "physical": True})
        return revision

    def stop_kwok(self) -> None:
        """Stop kwok (no kubelet answers any more: pods stay as they are, deletions hang)."""
        proc = self._processes.get("kwok")
        if proc is not None:
            proc.stop()

    def start_kwok(self) -> None:
        """Start kwok again after ``stop_kwok`` (it resumes every adopted Node and pod)."""
        if self.kwok is None:
            raise ControlPlaneError("kwok: this control plane was started without kwok")
        self._start_kwok(self.kwok)

    def pid(self, component: str) -> int | None:
        """The PID of a running component (``etcd``, ``kube-apiserver``, ..., ``kwok``)."""
        proc = self._processes.get(component)
        return proc.popen.pid if proc is not None and proc.popen is not None else None

    def log_path(self, component: str) -> Path:
        return self.work_dir / "logs" / f"{component}.log"

    # -- components ---------------------------------------------------------------------------

    def _write_pki(self) -> None:
        pki = Pki(self.work_dir / "pki")
        self._pki = pki
        pki.issue(
            "apiserver",
            "kube-apiserver",
            server_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            server_ips=("127.0.0.1", _KUBERNETES_SERVICE_IP),
        )
        pki.service_account_keys(self._sa_private, self._sa_public)
        self._admin = pki.issue("admin", "admin", organization="system:masters")
        self.kubeconfig.write_text(kubeconfig(self.server, pki.ca.cert, self._admin, "admin"))
        # The scheduler and controller-manager keep their canonical user names (so audit/events
        # read naturally) but sit in system:masters: the controller-manager without per-controller
        # service-account credentials would otherwise lack rights to e.g. create pods.
        for component in ("kube-scheduler", "kube-controller-manager", "kwok"):
            pair = pki.issue(component, f"system:{component}", organization="system:masters")
            path = self.work_dir / f"{component}.kubeconfig"
            path.write_text(kubeconfig(self.server, pki.ca.cert, pair, component))

    def _new_process(self, name: str, args: list[str], binary: Path | None = None) -> _Process:
        logs = self.work_dir / "logs"
        logs.mkdir(exist_ok=True)
        proc = _Process(name, [str(binary or self.bin_dir / name), *args], logs / f"{name}.log")
        self._processes[name] = proc
        return proc

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{_free_port()}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        proc = self._new_process(
            "etcd",
            [
                f"--data-dir={self._etcd_data}",
                "--name=default",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                # Test data is disposable; skipping fsync makes etcd fast on slow CI disks.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        proc.start()
        self._wait(proc, lambda: _http_ok(f"{client}/health", None), "etcd /health")

    def _apiserver_args(self) -> list[str]:
        pki = self._pki
        assert pki is not None
        d = pki.directory
        return [
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--tls-cert-file={d / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--client-ca-file={pki.ca.cert}",
            f"--service-account-key-file={self._sa_public}",
            f"--service-account-signing-key-file={self._sa_private}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={_SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            # ServiceAccount admission rejects pods until the controller-manager has created the
            # namespace's `default` ServiceAccount; TaintNodesByCondition would put a not-ready
            # taint on every test-created Node that no kubelet will ever clear.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
            *self._audit_args(),
        ]

    def _audit_args(self) -> list[str]:
        if not self._audit_policy:
            return []
        policy = self.work_dir / "audit-policy.yaml"
        policy.write_text(self._audit_policy)
        self.audit_log.parent.mkdir(parents=True, exist_ok=True)
        # blocking mode: an event is on disk before its request is answered
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ]

    def _start_apiserver(self) -> None:
        proc = self._new_process("kube-apiserver", self._apiserver_args())
        # After SIGTERM the apiserver closes its listener and watches within milliseconds, then
        # lingers ~10 s in controller shutdown; all state is in etcd, so do not wait for that.
        proc.grace_s = _APISERVER_STOP_GRACE_S
        proc.start()
        self._wait_apiserver_ready(proc)

    def _wait_apiserver_ready(self, proc: _Process) -> None:
        ctx = self.ssl_context()
        self._wait(proc, lambda: _http_ok(f"{self.server}/readyz", ctx), "kube-apiserver /readyz")

    def _scheduler_args(self) -> list[str]:
        kubeconfig = self.work_dir / "kube-scheduler.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            # No --authentication/authorization-kubeconfig: delegated auth only adds log noise.
            "--bind-address=127.0.0.1",
            # Never the default 10259: parallel sessions would collide on it.
            f"--secure-port={self.scheduler_port}",
            # /metrics and /debug/pprof readable without credentials on loopback: the attempts
            # and queue gauges, a goroutine dump, show what the scheduler did with a burst
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*",
            "--leader-elect=false",
            # As Kubernetes 1.35 runs by default (beta there, alpha and off in the pinned
            # 1.34): a nominatedNodeName set by another component (Karpenter's
            # PublishNominations) survives the pod's failed attempts (but for preemption's).
            "--feature-gates=NominatedNodeNameForExpectation=true",
            *(self.client_rate.args() if self.client_rate else []),
            "--v=1",
        ]

    def _controller_manager_args(self) -> list[str]:
        pki = self._pki
        assert pki is not None
        kubeconfig = self.work_dir / "kube-controller-manager.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={_free_port()}",
            "--leader-elect=false",
            f"--service-account-private-key-file={self._sa_private}",
            f"--root-ca-file={pki.ca.cert}",
            f"--service-cluster-ip-range={_SERVICE_CIDR}",
            # Test nodes have no kubelet heartbeat: the node lifecycle controller would mark them
            # NotReady after 40 s and evict their pods. The taint-eviction controller races the
            # kube-scheduler (kubernetes/kubernetes#119862): its node informer may still show the
            # karpenter.sh/unregistered NoExecute taint when the scheduler, already seeing it
            # removed, binds a pod, and it then deletes that pod at once. Seconds-old simulated
            # nodes hit that window far more often than real ones; Karpenter's own drain, not
            # kube-controller-manager's NoExecute eviction, is what runs here.
            "--controllers=*,-nodelifecycle,-taint-eviction-controller",
            *(self.client_rate.args() if self.client_rate else []),
            "--v=1",
        ]

    def _start_kwok(self, options: kwok_mod.KwokOptions) -> None:
        config = self.work_dir / "kwok.yaml"
        config.write_text(options.config_text())
        port = _free_port()
        args = options.args(self.work_dir / "kwok.kubeconfig", config, port)
        proc = self._new_process("kwok", args[1:], binary=Path(args[0]))
        if not os.access(args[0], os.X_OK):
            raise ControlPlaneError(f"kwok: no executable at {args[0]} (hack/build-kwok.sh)")
        proc.start()
        health = f"http://127.0.0.1:{port}/healthz"
        self._wait(proc, lambda: _http_ok(health, None), "kwok /healthz")

    def _start_component(self, name: str, args: list[str]) -> None:
        proc = self._new_process(name, args)
        proc.start()
        # These components have no cheap readiness probe we can reach without more certs; a
        # short settle period catches flag errors and immediate crashes.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if not proc.alive():
                raise ControlPlaneError(f"{name} exited at startup\n{proc.tail()}")
            time.sleep(0.1)

    def _wait(self, proc: _Process, probe: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        while time.monotonic() < deadline:
            if not proc.alive():
                raise ControlPlaneError(f"{proc.name} exited before {what} passed\n{proc.tail()}")
            if probe():
                return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{what} not ready after {self._startup_timeout_s:.0f}s\n{proc.tail()}"
        )

    # -- client helpers -----------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context that trusts the test CA and presents the admin client certificate."""
        assert self._pki is not None and self._admin is not None
        ctx = ssl.create_default_context(cafile=str(self._pki.ca.cert))
        ctx.load_cert_chain(str(self._admin.cert), str(self._admin.key))
        return ctx


def _post_json(url: str, body: dict[str, object]) -> dict[str, Any]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


def _http_ok(url: str, ctx: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False
