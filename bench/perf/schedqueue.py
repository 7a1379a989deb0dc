"""The kube-scheduler's queue over one scale-out, read from its ``/metrics`` every half second.

What the scheduler did with a burst is not in any object: how many pods waited in its active
queue, in backoff or as unschedulable, how many attempts failed and how many pods it had bound.
A failed attempt costs the scheduler a synchronous status write (``handleSchedulingFailure``
patches ``PodScheduled=False`` before the next pod is popped), so while the apiserver is slow
the active queue drains at a few pods a second and pods whose node is open wait behind pods
whose node is not: this table shows when that happens. The control plane serves ``/metrics``
without credentials on loopback (``LocalControlPlane``'s scheduler flags).
"""

from __future__ import annotations

import functools
import ssl
import urllib.request
from dataclasses import dataclass, field

import anyio

from karpenter.aio.clock import RealClock

INTERVAL_S = 0.5
_QUEUES = ("active", "backoff", "unschedulable")


@dataclass
class Sample:
    """One read of the scheduler's gauges and counters, ``at`` seconds into the phase."""

    at: float
    pending: dict[str, float]
    scheduled: float
    failed: float


@dataclass
class SchedulerQueue:
    """Samples of one scheduler's queue."""

    port: int
    started: float
    samples: list[Sample] = field(default_factory=list)

    async def follow(self) -> None:
        """Sample until cancelled; a read that fails (the scheduler restarting) is skipped."""
        while True:
            try:
                text = await anyio.to_thread.run_sync(self.read)
            except OSError:
                text = None
            if text is not None:
                self.samples.append(parse(text, RealClock().now() - self.started))
            await anyio.sleep(INTERVAL_S)

    def read(self) -> str:
        """The scheduler's metrics text (blocking: ``follow`` runs it in a thread)."""
        url = f"https://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, context=_tls(), timeout=2) as resp:
            body: bytes = resp.read()
        return body.decode()

    def table(self) -> str:
        """Markdown, one row a second while anything was pending or being bound."""
        lines = [
            "| s | active | backoff | unschedulable | bound | failed attempts |",
            "|---|---|---|---|---|---|",
        ]
        last_second = -1
        previous: Sample | None = None
        for sample in self.samples:
            second = int(sample.at)
            busy = any(sample.pending.values()) or (
                previous is not None and sample.scheduled != previous.scheduled
            )
            previous = sample
            if second == last_second or not busy:
                continue
            last_second = second
            lines.append(
                f"| {sample.at:.1f} | "
                + " | ".join(f"{sample.pending.get(q, 0):g}" for q in _QUEUES)
                + f" | {sample.scheduled:g} | {sample.failed:g} |"
            )
        return "\n".join(lines)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One client context for every read (building one loads the system's CA bundle)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving certificate
    return ctx


def parse(text: str, at: float) -> Sample:
    """The queue gauges and attempt counters out of a Prometheus text exposition."""
    pending: dict[str, float] = {}
    scheduled = failed = 0.0
    for line in text.splitlines():
        if line.startswith("scheduler_pending_pods{"):
            for queue in _QUEUES:
                if f'queue="{queue}"' in line:
                    pending[queue] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("scheduler_schedule_attempts_total{"):
            value = float(line.rsplit(" ", 1)[1])
            if 'result="scheduled"' in line:
                scheduled += value
            else:  # unschedulable or error
                failed += value
    return Sample(at, pending, scheduled, failed)
