"""The AWS background services: periodic loops, the SQS interruption poller, the zonal-shift poll.

``every`` turns a one-pass reconcile (returning the seconds until the next) into a service
that logs a failed pass and retries; the others bind a controller to its AWS client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
import anyio.abc

from karpenter.aio.clock import Clock
from karpenter.cloud.plugin import Service
from karpenter.observability.logging import get_logger
from karpenter.observability.metrics import Metrics
from karpenter.providers.aws.cloud import provider_metrics, sqs
from karpenter.providers.aws.cloud import zonalshift as arc_zonalshift
from karpenter.providers.aws.cloud.provider import AWSCloudProvider
from karpenter.providers.aws.controllers.interruption import InterruptionController
from karpenter.providers.aws.controllers.nodeclass import NodeClassController
from karpenter.providers.aws.controllers.zonalshift import ZonalShiftPoller
from karpenter.providers.aws.core import interruption as interruption_msg
from karpenter.providers.aws.runtime.nodeclasses import NodeClasses, ShiftAudience


def every(clock: Clock, name: str, once: Callable[[], Awaitable[float]]) -> Service:
    """A service that runs ``once`` and sleeps the seconds it returns, logging failures."""
    log = get_logger("aws").bind(controller=name)

    async def loop(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                wait = await once()
            except Exception as err:  # one failed pass must not stop the controller
                log.error("reconcile failed", error=str(err))
                wait = 30.0
            await clock.sleep(max(wait, 1.0))

    return loop


async def zonal_shift(
    cloud: AWSCloudProvider, clock: Clock, audience: ShiftAudience
) -> list[Service]:
    """The 30s zonal-shift poll, when ARC manages the cluster (else none, as upstream now)."""
    arn = cloud.cluster_arn
    if not arn or not await arc_zonalshift.registered(cloud.clients.arc, arn):
        get_logger("aws").warning("cluster is not registered with ARC zonal shift", arn=arn)
        return []
    poller = ZonalShiftPoller(cloud, cloud.clients.arc, arn, clock.now, audience)
    return [every(clock, "providers.zonalshift", poller.reconcile)]


def interruptions(
    cloud: AWSCloudProvider,
    interruption: InterruptionController,
    queue: str,
    clock: Clock,
    metrics: Metrics,
) -> Service:
    """The SQS interruption poller, counting messages as upstream's interruption metrics do."""

    async def handle(message: interruption_msg.Message) -> None:
        metrics.interruption_received_messages.labels(message_type=message.kind).inc()
        await interruption.handle(message)
        sent = _event_time(message.time)
        if sent is not None:
            metrics.interruption_message_queue_duration.observe(max(clock.now() - sent, 0.0))
        metrics.interruption_deleted_messages.inc()

    async def run(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        url = await sqs.queue_url(cloud.clients.sqs, queue)
        await sqs.poll_interruptions(
            cloud.clients.sqs,
            url,
            handle,
            interruption.log,
            clock.sleep,
            on_poll=lambda stats: count_malformed(metrics, stats),
        )

    return run


def count_malformed(metrics: Metrics, stats: sqs.PollStats) -> None:
    """Unparseable messages were received and deleted: counted under ``message_type="malformed"``
    (upstream has no kind for them; without a count they vanished from the metrics)."""
    if stats.malformed:
        metrics.interruption_received_messages.labels(message_type="malformed").inc(stats.malformed)
        metrics.interruption_deleted_messages.inc(stats.malformed)


def _event_time(stamp: str) -> float | None:
    """An EventBridge ``time`` (RFC 3339) as unix seconds; None when absent or unreadable."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


async def second(pair: Awaitable[tuple[Any, float]]) -> float:
    """The wait of a reconcile that returns (what it did, seconds until the next)."""
    return (await pair)[1]


def nodeclass_loop(classes: NodeClasses, controller: NodeClassController) -> Service:
    """Reconcile every EC2NodeClass when one changes, else at the soonest requeue (≤ 5 min)."""

    async def loop(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        log = get_logger("aws").bind(controller="nodeclass")
        task_status.started()
        while True:
            classes.changed = anyio.Event()
            wait = 300.0
            for name in sorted(classes.store.entries):
                try:
                    result = await controller.reconcile(name)
                except Exception as err:  # keep reconciling the others
                    log.error("reconcile failed", nodeclass=name, error=str(err))
                    result_wait = 10.0
                else:
                    result_wait = result.requeue_after or wait
                wait = min(wait, result_wait)
            with anyio.move_on_after(wait):
                await classes.changed.wait()

    return loop


def offerings(
    classes: NodeClasses, cloud: AWSCloudProvider, metrics: Metrics
) -> Callable[[], Awaitable[float]]:
    """One pass of the offering gauges over the Ready NodeClasses' catalogs."""

    async def once() -> float:
        ready = [c for c in classes.store.values() if c.status.ready() == "True"]
        provider_metrics.publish_offerings(metrics, (it for c in ready for it in cloud.catalog(c)))
        return 60.0  # upstream refreshes these gauges every minute

    return once
