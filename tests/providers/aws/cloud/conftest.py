"""A moto server per session, an EC2 "capacity" proxy in front of it, and a seeded account.

Every test talks to moto over real HTTP with real botocore (aioboto3 clients pointed at
``endpoint_url``); nothing in the SDK is patched. Two things moto cannot do are supplied
honestly:

- Insufficient capacity. The proxy holds a set of (instance type, zone) pools with no
  capacity. For a CreateFleet it drops those pools' overrides before forwarding (EC2 skips
  pools it cannot fill), and adds one ``errorSet`` item per dropped pool to moto's XML answer;
  when every pool is dropped it answers with the errors and no instances, as EC2 does. botocore
  parses the rewritten response like any EC2 answer.
- Authorization. For the actions in ``deny`` the proxy answers dry runs with EC2's
  ``UnauthorizedOperation`` error, as EC2 does when IAM denies the call. moto ignores
  ``DryRun`` on CreateFleet (it would launch), so allowed CreateFleet dry runs get EC2's
  ``DryRunOperation`` answer from the proxy.
- Placement groups. moto 5.2.1 has no placement-group API; the proxy answers
  DescribePlacementGroups itself from ``Capacity.placement_groups`` (``placement_proxy.py``
  renders EC2's response and its not-found errors; listed in ``deny``, the call itself is
  refused with ``UnauthorizedOperation``). When ``partition_number`` is set, DescribeInstances
  answers carry it as each instance's ``Placement.PartitionNumber``: moto ignores a template's
  placement, and this is the partition EC2 would have assigned in a partition group.
- ARC zonal shift. moto 5.2.1 has no ``arc-zonal-shift``; the proxy answers its
  GetManagedResource (``GET /managedresources/<arn>``) from ``Capacity.arc``
  (``arc_proxy.py``: ARC's JSON shape, ``ResourceNotFoundException`` for an unmanaged ARN).
- Capacity reservations (moto 5.2.1 has no capacity reservation API). The test holds them
  in ``Capacity.reservations``; the proxy answers DescribeCapacityReservations from them in
  EC2's XML, notes which launch template targets which reservation, refuses fleets into a
  full reservation with ``ReservationCapacityExceeded``, forwards capacity-block fleets as
  on-demand, counts launches against the reservation and adds the reservation fields to
  DescribeInstances answers for instances launched into one (``ec2_reservations.py``).
- AWS-owned SSM public parameters (``/aws/service/eks/...``). PutParameter refuses the
  reserved ``/aws`` prefix, so the test seeds them into moto's in-process SSM backend, the way
  moto itself preloads ``/aws/service/ami-amazon-linux-latest``.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import functools
import http.client
import http.server
import threading
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import pytest
import pytest_asyncio
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

from karpenter.providers.aws.cloud import clients as aws_clients
from karpenter.providers.aws.cloud import ec2data
from karpenter.providers.aws.cloud.ec2data import RegionTypes
from tests.providers.aws.cloud import arc_proxy, placement_proxy
from tests.providers.aws.cloud.ec2_reservations import Reservations

REGION = "us-east-1"
ACCOUNT = "123456789012"
CLUSTER = "demo"
K8S = "1.31"


@dataclass
class Capacity:
    """Pools (instance type, zone) without capacity, shared with the proxy thread."""

    empty: set[tuple[str, str]] = field(default_factory=set)
    fleet_calls: int = 0
    last_pools: list[tuple[str, str]] = field(default_factory=list)  # last CreateFleet's pools
    deny: set[str] = field(default_factory=set)  # EC2 actions whose dry runs are unauthorized
    codes: dict[tuple[str, str], str] = field(default_factory=dict)  # pool → error (default ICE)
    messages: dict[tuple[str, str], str] = field(default_factory=dict)  # pool → error message
    calls: collections.Counter[str] = field(default_factory=collections.Counter)  # EC2 actions
    placement_groups: list[placement_proxy.Group] = field(default_factory=list)  # EC2's groups
    partition_number: int | None = None  # the partition EC2 "assigned" (DescribeInstances)
    arc: arc_proxy.Resources = field(default_factory=arc_proxy.Resources)  # ARC zonal shifts
    reservations: Reservations = field(default_factory=Reservations)  # capacity reservations


@functools.cache
def _session() -> aioboto3.Session:
    # one session for the run: botocore then loads each service model once
    return aioboto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )


def _rewrite_fleet(
    params: list[tuple[str, str]], empty: set[tuple[str, str]]
) -> tuple[list[tuple[str, str]], list[dict[str, str]], list[tuple[str, str]]]:
    """Drop overrides of empty pools and renumber the rest; return the dropped pools."""
    overrides: dict[tuple[str, str], dict[str, str]] = {}
    other = []
    for key, value in params:
        parts = key.split(".")
        if len(parts) >= 5 and parts[0] == "LaunchTemplateConfigs" and parts[2] == "Overrides":
            overrides.setdefault((parts[1], parts[3]), {})[".".join(parts[4:])] = value
        else:
            other.append((key, value))
    dropped = []
    requested: list[tuple[str, str]] = []
    kept: dict[str, list[dict[str, str]]] = {}
    for (config, _), fields in sorted(
        overrides.items(), key=lambda kv: (int(kv[0][0]), int(kv[0][1]))
    ):
        pool = (fields.get("InstanceType", ""), fields.get("AvailabilityZone", ""))
        requested.append(pool)
        if pool in empty:
            dropped.append({**fields, "config": config})
        else:
            kept.setdefault(config, []).append(fields)
    for config, items in kept.items():
        for n, fields in enumerate(items, 1):
            other.extend(
                (f"LaunchTemplateConfigs.{config}.Overrides.{n}.{k}", v) for k, v in fields.items()
            )
    return other, dropped, requested


def _error_items(
    dropped: list[dict[str, str]],
    lifecycle: str,
    capacity: Capacity,
    overrides: dict[tuple[str, str], str] | None = None,
) -> str:
    """EC2's errorSet for the dropped pools (``overrides``: codes that win, e.g. a full
    reservation's ``ReservationCapacityExceeded``)."""
    items = []
    for d in dropped:
        pool = (d.get("InstanceType", ""), d.get("AvailabilityZone", ""))
        code = (overrides or {}).get(pool) or capacity.codes.get(
            pool, "InsufficientInstanceCapacity"
        )
        message = capacity.messages.get(
            pool,
            "We currently do not have sufficient capacity in the Availability Zone you requested.",
        )
        items.append(
            "<item><launchTemplateAndOverrides><overrides>"
            f"<instanceType>{d.get('InstanceType', '')}</instanceType>"
            f"<subnetId>{d.get('SubnetId', '')}</subnetId>"
            f"<availabilityZone>{d.get('AvailabilityZone', '')}</availabilityZone>"
            "</overrides></launchTemplateAndOverrides>"
            f"<lifecycle>{lifecycle}</lifecycle>"
            f"<errorCode>{code}</errorCode>"
            f"<errorMessage>{message}</errorMessage>"
            "</item>"
        )
    return "<errorSet>" + "".join(items) + "</errorSet>"


_DENIED = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
    "<Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this "
    "operation.</Message></Error></Errors><RequestID>r</RequestID></Response>"
)


_DRY_RUN_OK = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
    "<Code>DryRunOperation</Code><Message>Request would have succeeded, but DryRun flag is "
    "set.</Message></Error></Errors><RequestID>r</RequestID></Response>"
)


@dataclass
class _Rewrite:
    body: bytes
    extra: str = ""  # errorSet XML to add to moto's answer
    reply: tuple[int, str] | tuple[int, str, str] | None = None  # answer without moto
    patch: tuple[str, str] | None = None  # (old, new) replaced throughout moto's answer
    fleet: bool = False  # a CreateFleet: launches count against reservations
    instances: bool = False  # a DescribeInstances: reserved instances say so


def _rewrite(body: bytes, capacity: Capacity, path: str = "/") -> _Rewrite:
    """What EC2 would do differently from moto for this request (or ARC, which moto lacks)."""
    if path.startswith(arc_proxy.PREFIX):
        return _Rewrite(body, reply=(*arc_proxy.answer(path, capacity.arc), "application/json"))
    action = dict(urllib.parse.parse_qsl(body.decode())).get("Action", "")
    capacity.calls[action] += 1
    if action in capacity.deny and b"DryRun=true" in body:
        return _Rewrite(body, reply=(403, _DENIED))  # EC2's answer when IAM denies the call
    if action == "CreateFleet" and b"DryRun=true" in body:
        return _Rewrite(body, reply=(412, _DRY_RUN_OK))  # moto would launch; EC2 only checks
    if action == "CreateFleet":
        return _rewrite_create_fleet(body, capacity)
    return _rewrite_other(action, body, capacity)


def _rewrite_other(action: str, body: bytes, capacity: Capacity) -> _Rewrite:
    """The describe-style actions moto lacks or answers differently from EC2."""
    if action == "DescribePlacementGroups":
        query = urllib.parse.parse_qs(body.decode())
        denied = action in capacity.deny  # Karpenter never dry-runs it: deny the call itself
        reply = placement_proxy.answer(query, capacity.placement_groups, denied)
        return _Rewrite(body, reply=reply)
    if action == "DescribeCapacityReservations":
        return _Rewrite(body, reply=capacity.reservations.describe(dict(_params(body))))
    if action == "CreateLaunchTemplate":
        capacity.reservations.note_template(dict(_params(body)))
    if action == "DescribeInstances":
        patch = None
        if capacity.partition_number is not None:
            number = f"<partitionNumber>{capacity.partition_number}</partitionNumber>"
            patch = ("<placement>", "<placement>" + number)
        return _Rewrite(body, patch=patch, instances=True)
    return _Rewrite(body)


def _rewrite_create_fleet(body: bytes, capacity: Capacity) -> _Rewrite:
    """A CreateFleet with EC2's ICE, reservation and service-linked-role behaviour."""
    capacity.fleet_calls += 1
    params, full = capacity.reservations.fleet(_params(body))
    body = urllib.parse.urlencode(params).encode()
    key = "TargetCapacitySpecification.DefaultTargetCapacityType"
    lifecycle = dict(params).get(key, "on-demand")
    slr = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
    # a missing spot service-linked role only fails spot requests
    empty = {p for p in capacity.empty if capacity.codes.get(p) != slr or lifecycle == "spot"}
    empty |= set(full)
    params, dropped, capacity.last_pools = _rewrite_fleet(params, empty)
    if not dropped:
        return _Rewrite(body, fleet=True)
    extra = _error_items(dropped, dict(params).get(key, "on-demand"), capacity, full)
    if not any(".Overrides." in k for k, _ in params):
        return _Rewrite(
            body,
            reply=(
                200,
                '<?xml version="1.0" encoding="UTF-8"?><CreateFleetResponse '
                'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId>'
                f"<fleetId>fleet-ice</fleetId>{extra}<fleetInstanceSet/></CreateFleetResponse>",
            ),
        )
    return _Rewrite(urllib.parse.urlencode(params).encode(), extra, fleet=True)


def _params(body: bytes) -> list[tuple[str, str]]:
    return urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)


def _amend(rw: _Rewrite, status: int, data: str, capacity: Capacity) -> str:
    """moto's answer as EC2 would have given it."""
    if rw.extra:
        data = data.replace("<fleetInstanceSet>", rw.extra + "<fleetInstanceSet>", 1)
    if rw.patch:
        data = data.replace(*rw.patch)
    if rw.fleet and status == 200:
        capacity.reservations.after_fleet(data)
    if rw.instances and status == 200:
        data = capacity.reservations.after_describe_instances(data)
    return data


def make_proxy(upstream: str, capacity: Capacity) -> http.server.ThreadingHTTPServer:
    target = urllib.parse.urlparse(upstream)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _forward(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            rw = _rewrite(body, capacity, self.path)
            if rw.reply is not None:
                return self._reply(*rw.reply)
            conn = http.client.HTTPConnection(
                target.hostname or "127.0.0.1", target.port, timeout=60
            )
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
            }
            headers["Content-Length"] = str(len(rw.body))
            conn.request(method, self.path, body=rw.body, headers=headers)
            resp = conn.getresponse()
            data = resp.read().decode()
            conn.close()
            data = _amend(rw, resp.status, data, capacity)
            self._reply(resp.status, data, resp.getheader("Content-Type") or "text/xml")

        def _reply(self, status: int, text: str, ctype: str = "text/xml") -> None:
            raw = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            self._forward("POST")

        def do_GET(self) -> None:
            self._forward("GET")

    return http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@dataclass
class Moto:
    url: str  # moto itself
    proxy_url: str  # the capacity proxy in front of it
    capacity: Capacity


@pytest.fixture(scope="session")
def moto() -> Iterator[Moto]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    capacity = Capacity()
    proxy = make_proxy(url, capacity)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield Moto(url, f"http://127.0.0.1:{proxy.server_address[1]}", capacity)
    finally:
        proxy.shutdown()
        proxy.server_close()
        server.stop()


@pytest.fixture(scope="session")
def region_types(moto: Moto) -> RegionTypes:
    """DescribeInstanceTypes/Offerings/AZs against moto, once per session."""

    async def discover() -> RegionTypes:
        async with aws_clients.open_clients(REGION, moto.url, _session()) as c:
            return await ec2data.discover(c.ec2)

    return asyncio.run(discover())


def seed_ssm(name: str, value: str) -> None:
    """Add an AWS-owned public parameter to moto's SSM backend (see module docstring)."""
    backend = ssm_backends[ACCOUNT][REGION]
    backend._parameters[name].append(
        Parameter(  # type: ignore[abstract]  # moto's CloudFormation mixin; constructed as moto does
            account_id=ACCOUNT,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=dt.datetime.now(dt.UTC),  # noqa: TID251 - moto's own record
            version=1,
            data_type="text",
        )
    )


@pytest_asyncio.fixture
async def clients(moto: Moto, account: Account) -> AsyncIterator[aws_clients.Clients]:
    """Clients of the seeded moto account, through the capacity proxy.

    The account is seeded once per session (resetting moto per test costs seconds); tests
    stay independent by using their own cluster name (``cluster``), which scopes every tag,
    instance profile and launch template they create.
    """
    moto.capacity.empty.clear()
    moto.capacity.fleet_calls = 0
    moto.capacity.last_pools = []
    moto.capacity.deny.clear()
    moto.capacity.codes.clear()
    moto.capacity.messages.clear()
    moto.capacity.calls.clear()
    moto.capacity.placement_groups.clear()
    moto.capacity.partition_number = None
    moto.capacity.arc.managed.clear()
    moto.capacity.reservations.clear()
    async with aws_clients.open_clients(REGION, moto.proxy_url, _session()) as c:
        yield c


@dataclass(frozen=True)
class Account:
    """What ``account`` created: the ids tests select and assert on."""

    subnets: dict[str, str]  # zone -> subnet id (tagged for discovery)
    security_group: str
    ami_standard: str
    ami_nvidia: str
    ami_custom: str
    role: str = "KarpenterNodeRole-demo"


async def _image(ec2: Any, name: str) -> str:
    base = await ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}]
    )
    source = next(i["ImageId"] for i in base["Images"] if i.get("Platform") != "windows")
    run = await ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="t3.micro")
    instance_id = run["Instances"][0]["InstanceId"]
    image = await ec2.create_image(InstanceId=instance_id, Name=name)
    await ec2.terminate_instances(InstanceIds=[instance_id])
    return str(image["ImageId"])


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> str:
    """A cluster name of the test's own."""
    return f"demo-{abs(hash(request.node.nodeid)) % 10**8}"


@pytest.fixture(scope="session")
def account(moto: Moto) -> Account:
    """Two discovery-tagged subnets, a security group, AMIs behind al2023@latest, a role."""

    async def seed() -> Account:
        async with aws_clients.open_clients(REGION, moto.url, _session()) as c:
            return await _seed(c)

    return asyncio.run(seed())


async def _seed(clients: aws_clients.Clients) -> Account:
    ec2 = clients.ec2
    subnets: dict[str, str] = {}
    for s in (await ec2.describe_subnets())["Subnets"]:
        if s["AvailabilityZone"] in ("us-east-1a", "us-east-1b"):
            subnets[s["AvailabilityZone"]] = s["SubnetId"]
    discovery = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
    await ec2.create_tags(Resources=sorted(subnets.values()), Tags=discovery)
    vpc = (await ec2.describe_vpcs())["Vpcs"][0]["VpcId"]
    sg = await ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc)
    await ec2.create_tags(Resources=[sg["GroupId"]], Tags=discovery)
    standard = await _image(ec2, "amazon-eks-node-al2023-x86_64-standard-1.31-v20261101")
    nvidia = await _image(ec2, "amazon-eks-node-al2023-x86_64-nvidia-1.31-v20261101")
    custom = await _image(ec2, "team-golden-image")
    base = f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64"
    seed_ssm(f"{base}/standard/recommended/image_id", standard)
    seed_ssm(f"{base}/nvidia/recommended/image_id", nvidia)
    await clients.iam.create_role(RoleName="KarpenterNodeRole-demo", AssumeRolePolicyDocument="{}")
    return Account(subnets, sg["GroupId"], standard, nvidia, custom)
