"""The interruption queue: long-poll SQS, parse each message, hand it over, delete it.

Upstream's loop: ReceiveMessage (10 messages, 20s wait, 20s visibility). A message that does
not parse is logged and deleted; a parsed one goes to ``handler`` and is deleted when the
handler returns (no-op kinds too, so foreign messages never pile up); a handler error leaves
the message for redelivery. Nothing here raises on a bad message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import interruption

Handler = Callable[[interruption.Message], Awaitable[None]]


@dataclass
class PollStats:
    """Counts of one poll, for logs, metrics and tests."""

    received: int = 0
    handled: int = 0
    malformed: int = 0
    failed: int = 0
    deleted: int = 0


async def queue_url(sqs: Client, name: str) -> str:
    """The URL of the queue named ``INTERRUPTION_QUEUE`` (a name, not an ARN)."""
    out = await sqs.get_queue_url(QueueName=name)
    return str(out["QueueUrl"])


async def poll_once(
    sqs: Client, url: str, handler: Handler, log: Any, wait_seconds: int = 20
) -> PollStats:
    """One ReceiveMessage round, every message handled and deleted as described above."""
    out = await sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=20,
        WaitTimeSeconds=wait_seconds,
        AttributeNames=["SentTimestamp"],
        MessageAttributeNames=["All"],
    )
    stats = PollStats()
    # upstream handles a batch with 10 workers; a receive returns at most 10 messages
    async with anyio.create_task_group() as tg:
        for message in out.get("Messages", []):
            tg.start_soon(_one, sqs, url, handler, log, message, stats)
    return stats


async def _one(
    sqs: Client, url: str, handler: Handler, log: Any, message: dict[str, Any], stats: PollStats
) -> None:
    """Handle one message; delete it unless its handler failed."""
    stats.received += 1
    body = str(message.get("Body", ""))
    try:
        parsed = interruption.parse(body)
    except interruption.MessageError as err:
        stats.malformed += 1
        log.error("dropping malformed interruption message", error=str(err), body=body[:200])
    else:
        try:
            await handler(parsed)
        except Exception as err:  # redelivered after the visibility timeout
            stats.failed += 1
            log.error("handling interruption message failed", kind=parsed.kind, error=str(err))
            return
        stats.handled += 1
    await sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    stats.deleted += 1


async def poll_interruptions(
    sqs: Client,
    url: str,
    handler: Handler,
    log: Any,
    sleep: Callable[[float], Awaitable[None]],
    wait_seconds: int = 20,
    on_poll: Callable[[PollStats], None] | None = None,
) -> None:
    """Poll forever (until cancelled by the owning task group); errors of a round are logged.

    ``sleep`` is the injected clock's: after a failed round the loop backs off (1s doubling to
    a minute) instead of spinning on an unreachable queue. ``on_poll`` sees each round's counts
    (the runtime turns malformed messages into metrics).
    """
    backoff = 1.0
    while True:
        try:
            stats = await poll_once(sqs, url, handler, log, wait_seconds)
            if on_poll is not None:
                on_poll(stats)
            backoff = 1.0
        except Exception as err:  # a failed round must not end interruption handling
            log.error("receiving interruption messages failed", error=str(err), retry_in=backoff)
            await sleep(backoff)
            backoff = min(backoff * 2, 60.0)
