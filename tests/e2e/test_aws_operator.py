"""`karpenter run --cloud-provider aws` end to end: a real control plane and EC2/SQS/IAM on moto.

The operator runs in-process with the AWS provider pointed at a moto server on loopback (real
HTTP, real botocore). An EC2NodeClass gets its status resolved (subnets, security group, AMI,
instance profile) and Ready; a pending pod becomes a NodeClaim launched with CreateFleet; a spot
interruption warning on the SQS queue deletes that NodeClaim, whose termination finalizer
terminates the instance, and the still-pending pod gets a new NodeClaim. No kubelet runs, so
the claims never register; everything asserted happens before registration matters.

This test's moto resources carry their own tags and names, so it shares moto's in-process
backends with the provider tests without touching what they select.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aioboto3
import anyio
import pytest
import pytest_asyncio
from moto.server import ThreadedMotoServer

from karpenter.aio.clock import RealClock
from karpenter.controllers.context import ControllerContext
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import errors
from karpenter.operator import Operator
from karpenter.providers.aws.runtime import nodeclasses
from karpenter.providers.aws.runtime.compose import open_aws
from karpenter.providers.aws.runtime.nodeclasses import NODECLASS_FINALIZER
from karpenter.providers.aws.settings import AWSSettings
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.support import context

pytestmark = pytest.mark.e2e

REGION = "us-east-1"
CLUSTER = "e2e-aws-operator"
SELECT_TAG = "e2e.karpenter.test/aws-operator"
ROLE = "KarpenterNodeRole-e2e-aws-operator"
QUEUE = "e2e-aws-operator-interruptions"
TYPES = ["m5.large", "m5.xlarge"]


@dataclass(frozen=True)
class Cloud:
    url: str
    session: aioboto3.Session
    ami: str


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest_asyncio.fixture
async def cloud(moto_url: str) -> Cloud:
    """Subnets and a security group tagged for this test, a role, a queue, an AMI id."""
    session = aioboto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )
    async with (
        session.client("ec2", endpoint_url=moto_url) as ec2,
        session.client("iam", endpoint_url=moto_url) as iam,
        session.client("sqs", endpoint_url=moto_url) as sqs,
    ):
        subnets = [
            s["SubnetId"]
            for s in (await ec2.describe_subnets())["Subnets"]
            if s["AvailabilityZone"] in ("us-east-1a", "us-east-1b")
        ]
        tag = [{"Key": SELECT_TAG, "Value": "true"}]
        await ec2.create_tags(Resources=subnets, Tags=tag)
        vpc = (await ec2.describe_vpcs())["Vpcs"][0]["VpcId"]
        groups = await ec2.describe_security_groups(
            Filters=[{"Name": "group-name", "Values": [CLUSTER]}]
        )
        if groups["SecurityGroups"]:
            group = groups["SecurityGroups"][0]["GroupId"]
        else:
            made = await ec2.create_security_group(GroupName=CLUSTER, Description="e2e", VpcId=vpc)
            group = made["GroupId"]
        await ec2.create_tags(Resources=[group], Tags=tag)
        images = await ec2.describe_images(
            Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}]
        )
        ami = next(i["ImageId"] for i in images["Images"] if i.get("Platform") != "windows")
        try:
            await iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
        except iam.exceptions.EntityAlreadyExistsException:
            pass
        await sqs.create_queue(QueueName=QUEUE)
    return Cloud(moto_url, session, ami)


@contextlib.asynccontextmanager
async def aws_operator(control_plane: ControlPlane, cloud: Cloud) -> AsyncIterator[Operator]:
    """The operator with the AWS provider, as `karpenter run --cloud-provider aws` builds it.

    A context manager inside the test, not a fixture: the task group must be left in the
    task that entered it.
    """
    clock = RealClock()
    settings = AWSSettings(
        CLUSTER_NAME=CLUSTER,
        CLUSTER_ENDPOINT="https://k8s.example",
        AWS_REGION=REGION,
        INTERRUPTION_QUEUE=QUEUE,
    )
    async with kc.connect(control_plane.kubeconfig) as kube:
        base = context.host(kube, clock, settings=harness.settings())
        async with open_aws(
            base, settings, endpoint_url=cloud.url, session=cloud.session
        ) as plugin:
            op = Operator(
                ControllerContext.of(base, plugin),
                leader_services=plugin.leader_services,
                informers=plugin.informers,
            )
            async with anyio.create_task_group() as tg:
                await tg.start(op.run)
                yield op
                tg.cancel_scope.cancel()


def _nodeclass(name: str, ami: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"id": ami}],
            "subnetSelectorTerms": [{"tags": {SELECT_TAG: "true"}}],
            "securityGroupSelectorTerms": [{"tags": {SELECT_TAG: "true"}}],
            "role": ROLE,
        },
    }


def _nodepool(name: str, nodeclass: str) -> dict[str, Any]:
    body = harness.nodepool(name, [{"key": lbl.INSTANCE_TYPE, "operator": "In", "values": TYPES}])
    body["spec"]["template"]["spec"]["nodeClassRef"] = {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": nodeclass,
    }
    return body


def _spot_warning(instance_id: str) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "0b5a2f4e-e2e0-4c1b-9a51-1f4c7d1e2a33",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2026-11-23T10:00:00Z",
            "region": REGION,
            "resources": [],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


async def _instance_state(cloud: Cloud, instance_id: str) -> str:
    async with cloud.session.client("ec2", endpoint_url=cloud.url) as ec2:
        out = await ec2.describe_instances(InstanceIds=[instance_id])
    return str(out["Reservations"][0]["Instances"][0]["State"]["Name"])


@pytest.mark.asyncio
async def test_nodeclass_launch_and_spot_interruption(
    control_plane: ControlPlane, cloud: Cloud
) -> None:
    async with (
        aws_operator(control_plane, cloud) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        nodeclass = harness.unique("ec2")
        pool = harness.unique("aws")
        await kube.create(nodeclasses.EC2NODECLASSES, _nodeclass(nodeclass, cloud.ami))

        async def nodeclass_ready() -> dict[str, Any] | None:
            obj = await kube.get(nodeclasses.EC2NODECLASSES, nodeclass)
            conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}
            ready = conditions.get("Ready", {}).get("status") == "True"
            # status and finalizer are two writes (status subresource, then metadata): a read
            # can fall between them, so wait for both
            held = NODECLASS_FINALIZER in (obj["metadata"].get("finalizers") or [])
            return obj if ready and held else None

        resolved = await harness.eventually(nodeclass_ready, "the EC2NodeClass to become Ready")
        status = resolved["status"]
        assert len(status["subnets"]) == 2
        assert {s["zone"] for s in status["subnets"]} == {"us-east-1a", "us-east-1b"}
        assert [a["id"] for a in status["amis"]] == [cloud.ami]
        assert status["instanceProfile"]
        assert NODECLASS_FINALIZER in resolved["metadata"]["finalizers"]
        assert await kube.server_version() == "1.34"  # what AMI aliases resolve with

        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, _nodepool(pool, nodeclass))
        await kube.create(kc.PODS, harness.pod("web", pool), ns)

        async def launched() -> list[dict[str, Any]] | None:
            claims = await harness.claims_of(kube, pool)
            ok = [c for c in claims if (c.get("status") or {}).get("providerID", "")]
            return ok or None

        first = (await harness.eventually(launched, "a NodeClaim launched on EC2"))[0]
        provider_id = first["status"]["providerID"]
        assert provider_id.startswith("aws:///us-east-1")
        instance_id = provider_id.rsplit("/", 1)[1]
        assert await _instance_state(cloud, instance_id) in ("pending", "running")
        assert first["metadata"]["labels"][lbl.INSTANCE_TYPE] in TYPES

        async with cloud.session.client("sqs", endpoint_url=cloud.url) as sqs:
            url = (await sqs.get_queue_url(QueueName=QUEUE))["QueueUrl"]
            await sqs.send_message(QueueUrl=url, MessageBody=_spot_warning(instance_id))

            async def replaced() -> bool:
                claims = await harness.claims_of(kube, pool)
                names = {c["metadata"]["name"] for c in claims}
                fresh = [
                    c
                    for c in claims
                    if c["metadata"]["name"] != first["metadata"]["name"]
                    and (c.get("status") or {}).get("providerID")
                ]
                return first["metadata"]["name"] not in names and bool(fresh)

            await harness.eventually(replaced, "the interrupted NodeClaim to be replaced")
            assert await _instance_state(cloud, instance_id) in ("shutting-down", "terminated")
            depth = await sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            assert depth["Attributes"]["ApproximateNumberOfMessages"] == "0"
        text = op.metrics.render().decode()
        received = 'karpenter_interruption_received_messages_total{message_type="spot_interrupted"}'
        assert f"{received} 1.0" in text
        assert "karpenter_interruption_deleted_messages_total 1.0" in text
        assert "karpenter_interruption_message_queue_duration_seconds_count 1.0" in text

        await harness.cleanup(kube, pool, ns)
        await kube.delete(nodeclasses.EC2NODECLASSES, nodeclass)

        async def nodeclass_gone() -> bool:
            try:
                await kube.get(nodeclasses.EC2NODECLASSES, nodeclass)
            except errors.NotFound:
                return True
            return False

        await harness.eventually(nodeclass_gone, "the EC2NodeClass finalizer to be released")
