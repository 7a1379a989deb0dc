"""Bad input, fuzzed (matrix item 6): SQS bodies, settings from the environment, simulate files.

Every input either works or gets one clear line (or a logged, counted rejection); nothing
raises past its boundary. The SQS queue is moto's over real HTTP: an unparseable message is
deleted and counted, a message whose handling fails transiently stays for redelivery.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpenter import cli, launch
from karpenter.observability.metrics import Metrics
from karpenter.providers.aws.cloud import sqs
from karpenter.providers.aws.core import interruption
from karpenter.providers.aws.runtime.services import count_malformed
from tests.faults import aws as fa

pytestmark = pytest.mark.faults

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
_KNOWN = st.sampled_from(
    [
        ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        ("aws.ec2", "EC2 Instance State-change Notification"),
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
        ("aws.health", "AWS Health Event"),
        ("aws.ec2", "Something New"),
    ]
)


@st.composite
def events(draw: st.DrawFn) -> str:
    """EventBridge-shaped bodies with random holes and wrong types."""
    source, kind = draw(_KNOWN)
    doc: dict[str, Any] = {
        "version": draw(st.sampled_from(["0", "1", 0, None])),
        "source": source,
        "detail-type": kind,
        "detail": draw(_JSON | st.fixed_dictionaries({"instance-id": _JSON, "state": _JSON})),
    }
    for key in draw(st.lists(st.sampled_from(list(doc)), max_size=2)):
        doc.pop(key, None)
    return json.dumps(doc)


BODIES = st.text(max_size=200) | _JSON.map(json.dumps) | events()
KINDS = {
    interruption.SPOT_INTERRUPTED, interruption.REBALANCE, interruption.SCHEDULED_CHANGE,
    interruption.INSTANCE_STOPPED, interruption.INSTANCE_TERMINATED,
    interruption.CAPACITY_RESERVATION_INTERRUPTED, interruption.NOOP,
}  # fmt: skip


@given(BODIES)
@settings(max_examples=400, deadline=None)
def test_any_sqs_body_parses_or_is_a_message_error(body: str) -> None:
    """parse() returns a known kind or raises MessageError, for any text at all."""
    try:
        message = interruption.parse(body)
    except interruption.MessageError as err:
        assert str(err) and "\n" not in str(err)
        return
    assert message.kind in KINDS
    assert all(isinstance(i, str) and i for i in message.instance_ids)


def test_huge_and_deeply_nested_bodies_are_rejected_cleanly() -> None:
    """A 256 KiB body and a JSON nested past the parser's recursion limit are MessageErrors."""
    for body in ("{" * 100_000, "[" * 100_000 + "]" * 100_000, "x" * 262_144):
        with pytest.raises(interruption.MessageError):
            interruption.parse(body)


async def _poll(url: str, queue: str, bodies: list[str], flaky: str) -> tuple[sqs.PollStats, int]:
    """Send ``bodies``, poll until none is left to receive; the handler fails on ``flaky``
    kinds. Returns the summed counts and the messages left in flight for redelivery."""
    total = sqs.PollStats()
    handled: list[str] = []

    async def handler(message: interruption.Message) -> None:
        if message.kind == flaky:
            raise ConnectionError("apiserver unreachable")  # transient: keep the message
        handled.append(message.kind)

    async with fa.session().client("sqs", endpoint_url=url) as client:
        qurl = (await client.create_queue(QueueName=queue))["QueueUrl"]
        for body in bodies:
            await client.send_message(QueueUrl=qurl, MessageBody=body)
        while True:
            stats = await sqs.poll_once(client, qurl, handler, structlog.get_logger(), 0)
            for name in ("received", "handled", "malformed", "failed", "deleted"):
                setattr(total, name, getattr(total, name) + getattr(stats, name))
            if not stats.received:
                break
        attrs = await client.get_queue_attributes(
            QueueUrl=qurl, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
        )
        await client.delete_queue(QueueUrl=qurl)
    return total, int(attrs["Attributes"]["ApproximateNumberOfMessagesNotVisible"])


@given(st.lists(BODIES, min_size=1, max_size=12), st.data())
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_sqs_garbage_is_deleted_and_counted_transient_failures_stay(
    moto_url: str, bodies: list[str], data: st.DataObject
) -> None:
    """On a real queue: every message is received once; malformed and handled ones are
    deleted, the ones whose handler failed are not (redelivered later); counts add up and the
    malformed ones reach the metrics."""
    # duplicates and out-of-order delivery: repeat some and shuffle
    bodies = bodies + data.draw(st.lists(st.sampled_from(bodies), max_size=3))
    bodies = data.draw(st.permutations(bodies))
    queue = f"fuzz-{abs(hash(tuple(bodies))) % 10**9}"
    stats, in_flight = anyio.run(_poll, moto_url, queue, bodies, interruption.NOOP)
    assert stats.received == len(bodies)
    assert stats.malformed + stats.handled + stats.failed == stats.received
    assert stats.deleted == stats.malformed + stats.handled
    assert in_flight == stats.failed  # left for redelivery after the visibility timeout
    metrics = Metrics()
    count_malformed(metrics, stats)
    got = metrics.registry.get_sample_value(
        "karpenter_interruption_received_messages_total", {"message_type": "malformed"}
    )
    assert (got or 0) == stats.malformed


SETTINGS_NAMES = sorted(
    {"BATCH_MAX_DURATION", "BATCH_IDLE_DURATION", "PREFERENCE_POLICY", "MIN_VALUES_POLICY",
     "FEATURE_GATES", "LOG_LEVEL", "METRICS_PORT", "HEALTH_PROBE_PORT", "KUBE_CLIENT_QPS",
     "KUBE_CLIENT_BURST", "DISABLE_LEADER_ELECTION", "LEADER_ELECTION_NAME", "CPU_REQUESTS",
     "MEMORY_LIMIT", "LOG_OUTPUT_PATHS", "LOG_ENCODING", "SCHEDULER_CONFIG",
     "DISABLE_CLUSTER_STATE_OBSERVABILITY"}
)  # fmt: skip
VALUES = st.text(max_size=30) | st.sampled_from(
    ["0", "-1", "1e309", "nan", "true", "yes", "10s", "-5m", "Respect", "A=true,B", "{}", "[]"]
)


@contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@given(st.dictionaries(st.sampled_from(SETTINGS_NAMES), VALUES, min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_any_environment_gives_settings_or_one_line_naming_the_variable(
    env: dict[str, str],
) -> None:
    """Settings load, or LaunchError's single line names one of the variables that was set."""
    if any("\x00" in v for v in env.values()):
        return  # the OS itself cannot hold a NUL in the environment
    with _environ(env):
        try:
            launch._settings()
        except launch.LaunchError as err:
            text = str(err)
            assert "\n" not in text and text.startswith("invalid settings: "), text
            assert any(name in text for name in env), (env, text)


_DOC_KINDS = [
    "NodePool", "Pod", "Node", "NodeClaim", "DaemonSet", "InstanceType",
    "InstanceTypeCatalog", "PersistentVolumeClaim", "StorageClass", "List", "Bogus",
]  # fmt: skip


@st.composite
def scenario_docs(draw: st.DrawFn) -> list[Any]:
    """Kubernetes-shaped documents with random fields, and non-documents."""
    doc = st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(["v1", "karpenter.sh/v1", "x"]),
            "kind": st.sampled_from(_DOC_KINDS),
        },
        optional={
            "metadata": _JSON | st.fixed_dictionaries({"name": _JSON}),
            "spec": _JSON,
            "items": _JSON,
        },
    )
    return draw(st.lists(doc | _JSON, min_size=1, max_size=4))


@given(docs=scenario_docs())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_simulate_file_answers_or_exits_2_with_one_line(
    docs: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``karpenter simulate`` on any YAML prints a result (exit 0) or exits 2 with one line."""
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = cli.main(["simulate", str(path), "--output", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 2), (code, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("karpenter: "), err
    else:
        json.loads(out)
