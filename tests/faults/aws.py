"""The AWS side of fault experiments: a seeded moto account, the kubelet stand-in, the census.

moto answers EC2/IAM/SQS over real HTTP; the controller process reaches it through
``AWS_ENDPOINT_URL`` (botocore's own setting), optionally with EC2 alone routed through a fault
proxy (``AWS_ENDPOINT_URL_EC2``). There are no kubelets: ``NodeAgent`` plays the instances'
kubelets, registering a Node for every running instance of the cluster (tainted
``karpenter.sh/unregistered`` as a real node joins), exactly what a booted EC2 instance would do
whether or not a NodeClaim owns it, so a leaked instance shows up as a Node too.
``census`` counts what the matrix's goals are about.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import anyio
from moto.server import ThreadedMotoServer

from karpenter.aio.clock import RealClock
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from tests.e2e import harness

REGION = "us-east-1"
ROLE_PREFIX = "KarpenterNodeRole-"
LIVE = ["pending", "running"]
TYPES = ["m5.large", "m5.xlarge", "c5.large", "c5.xlarge", "r5.large"]
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on loopback; yields its URL."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def session() -> aioboto3.Session:
    return aioboto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )


@dataclass(frozen=True)
class Account:
    """One experiment's cluster in moto: its name, tag, AMI and interruption queue."""

    url: str
    cluster: str
    ami: str
    queue: str

    @property
    def select_tag(self) -> str:
        return f"faults.karpenter.test/{self.cluster}"


async def seed(url: str, cluster: str) -> Account:
    """Subnets and a security group tagged for ``cluster``, its node role, a queue, an AMI."""
    tag = [{"Key": f"faults.karpenter.test/{cluster}", "Value": "true"}]
    async with (
        session().client("ec2", endpoint_url=url) as ec2,
        session().client("iam", endpoint_url=url) as iam,
        session().client("sqs", endpoint_url=url) as sqs,
    ):
        subnets = [
            s["SubnetId"]
            for s in (await ec2.describe_subnets())["Subnets"]
            if s["AvailabilityZone"] in ("us-east-1a", "us-east-1b", "us-east-1c")
        ]
        await ec2.create_tags(Resources=subnets, Tags=tag)
        vpc = (await ec2.describe_vpcs())["Vpcs"][0]["VpcId"]
        # The VPC's default group, not a new one: moto's CreateFleet ignores the launch
        # template's network-interface Groups and puts every instance in the default group, so
        # any other selected group makes every instance look security-group drifted once the
        # drift check reaches it (a crash trial's replacement did: a spurious drift command).
        groups = await ec2.describe_security_groups(
            Filters=[
                {"Name": "vpc-id", "Values": [vpc]},
                {"Name": "group-name", "Values": ["default"]},
            ]
        )
        await ec2.create_tags(Resources=[groups["SecurityGroups"][0]["GroupId"]], Tags=tag)
        images = await ec2.describe_images(
            Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}]
        )
        ami = next(i["ImageId"] for i in images["Images"] if i.get("Platform") != "windows")
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            await iam.create_role(RoleName=ROLE_PREFIX + cluster, AssumeRolePolicyDocument="{}")
        await sqs.create_queue(QueueName=cluster)
    return Account(url, cluster, ami, cluster)


def controller_env(account: Account, ec2_url: str = "", **extra: str) -> dict[str, str]:
    """Settings of ``karpenter run --cloud-provider aws`` for this account (EC2 through
    ``ec2_url`` when a fault proxy sits in front of moto)."""
    env = {
        **CREDENTIALS,
        "AWS_ENDPOINT_URL": account.url,
        "AWS_REGION": REGION,
        "CLUSTER_NAME": account.cluster,
        "CLUSTER_ENDPOINT": "https://k8s.example",
        "INTERRUPTION_QUEUE": account.queue,
        **extra,
    }
    if ec2_url:
        env["AWS_ENDPOINT_URL_EC2"] = ec2_url
    return env


def nodeclass(account: Account, name: str) -> dict[str, Any]:
    sel = [{"tags": {account.select_tag: "true"}}]
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"id": account.ami}],
            "subnetSelectorTerms": sel,
            "securityGroupSelectorTerms": sel,
            "role": ROLE_PREFIX + account.cluster,
        },
    }


def nodepool(name: str, nodeclass_name: str, types: list[str] | None = None) -> dict[str, Any]:
    """An isolated NodePool (harness taint) on the EC2NodeClass, empty nodes consolidated."""
    reqs = [{"key": lbl.INSTANCE_TYPE, "operator": "In", "values": types or TYPES}]
    body = harness.nodepool(name, reqs)
    body["spec"]["template"]["spec"]["nodeClassRef"] = {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": nodeclass_name,
    }
    body["spec"]["disruption"] = {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "100%"}],
    }
    return body


async def live_instances(ec2: Any, cluster: str) -> list[dict[str, Any]]:
    """This cluster's instances that are pending or running."""
    out = await ec2.describe_instances(
        Filters=[
            {"Name": "tag:eks:eks-cluster-name", "Values": [cluster]},
            {"Name": "instance-state-name", "Values": LIVE},
        ]
    )
    return [i for r in out["Reservations"] for i in r["Instances"]]


def provider_id(instance: dict[str, Any]) -> str:
    return f"aws:///{instance['Placement']['AvailabilityZone']}/{instance['InstanceId']}"


@dataclass
class NodeAgent:
    """The kubelets of the cluster's instances: a Node per running instance, Ready at once."""

    kube: kc.KubeClient
    account: Account
    period_s: float = 0.3
    registered: set[str] = field(default_factory=set)  # instance ids given a Node

    async def run(self) -> None:
        async with session().client("ec2", endpoint_url=self.account.url) as ec2:
            while True:
                with contextlib.suppress(Exception):  # a kubelet retries; so does this loop
                    await self.once(ec2)
                await anyio.sleep(self.period_s)

    async def once(self, ec2: Any) -> None:
        claims, _ = await self.kube.list(kc.NODECLAIMS)
        by_pid = {(c.get("status") or {}).get("providerID", ""): c for c in claims}
        for inst in await live_instances(ec2, self.account.cluster):
            if inst["InstanceId"] not in self.registered:
                await self._join(inst, by_pid.get(provider_id(inst)))

    async def _join(self, inst: dict[str, Any], claim: dict[str, Any] | None) -> None:
        name = inst.get("PrivateDnsName") or inst["InstanceId"]
        status = (claim or {}).get("status") or {}
        allocatable = status.get("allocatable") or {"cpu": "2", "memory": "8Gi", "pods": "29"}
        zone = inst["Placement"]["AvailabilityZone"]
        labels = {
            lbl.HOSTNAME: name,
            lbl.INSTANCE_TYPE: inst["InstanceType"],
            lbl.ZONE: zone,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "providerID": provider_id(inst),
                "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
            },
        }
        try:
            await self.kube.create(kc.NODES, body)
        except errors.AlreadyExists:
            pass
        now = codec.rfc3339(RealClock().now())
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}
        ready |= {"lastHeartbeatTime": now, "lastTransitionTime": now}
        doc = {"capacity": allocatable, "allocatable": allocatable, "conditions": [ready]}
        await self.kube.merge_patch(kc.NODES, name, {"status": doc}, subresource="status")
        self.registered.add(inst["InstanceId"])


@dataclass
class Census:
    """What the goals are about, counted once the system has settled."""

    leaks: list[str]  # live instances no NodeClaim owns
    duplicates: list[str]  # pods whose NodeClaim history names more than one claim for them
    stuck_nodes: list[str]  # Nodes deleting but still present (a finalizer never released)
    stuck_claims: list[str]  # NodeClaims deleting but still present
    unplaced: list[str]  # pods never bound

    def total(self) -> int:
        return sum(
            map(len, (self.leaks, self.duplicates, self.stuck_nodes, self.stuck_claims))
        ) + len(self.unplaced)


async def census(kube: kc.KubeClient, ec2: Any, cluster: str, namespaces: list[str]) -> Census:
    """Leaks, stuck finalizers and unbound pods now (duplicates are counted by the caller)."""
    claims, _ = await kube.list(kc.NODECLAIMS)
    owned = {(c.get("status") or {}).get("providerID", "") for c in claims}
    leaks = [
        provider_id(i) for i in await live_instances(ec2, cluster) if provider_id(i) not in owned
    ]
    nodes, _ = await kube.list(kc.NODES)
    stuck_nodes = [n["metadata"]["name"] for n in nodes if n["metadata"].get("deletionTimestamp")]
    stuck_claims = [c["metadata"]["name"] for c in claims if c["metadata"].get("deletionTimestamp")]
    unplaced = []
    for ns in namespaces:
        pods, _ = await kube.list(kc.PODS, ns)
        unplaced += [f"{ns}/{p['metadata']['name']}" for p in pods if not p["spec"].get("nodeName")]
    return Census(leaks, [], stuck_nodes, stuck_claims, unplaced)


def duplicate_launches(claims_per_pod: dict[str, set[str]], replaced: set[str]) -> list[str]:
    """Pods that more than one live NodeClaim was made for at once (``replaced``: claims the
    experiment itself deleted, whose pods rightly got a new one)."""
    counts = collections.Counter[str]()
    for pod, names in claims_per_pod.items():
        if len(names - replaced) > 1:
            counts[pod] = len(names - replaced)
    return sorted(counts)
