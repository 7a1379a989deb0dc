"""A fault-injecting EC2 endpoint: a loopback HTTP proxy in front of moto.

The controller's real botocore traffic reaches it through ``AWS_ENDPOINT_URL_EC2``. Per EC2
action (the query protocol's ``Action``; ``*`` is the default) it draws, with seeded
probabilities, one fault per request:

- ``ice``: CreateFleet answers as EC2 does when no pool has capacity: every override in the
  ``errorSet`` with ``InsufficientInstanceCapacity``, no instances;
- ``throttle``: HTTP 503 ``RequestLimitExceeded`` (EC2's throttling answer);
- ``5xx``: HTTP 500 ``InternalError``;
- ``reset``: the connection is closed with a TCP RST, no answer;
- ``timeout``: the request hangs ``hold_s`` seconds, then the connection is reset (the SDK's
  own 240 s read timeout is not waited out: a held request that dies is what it sees from a
  load balancer's idle timeout).

Independently, pools in ``no_capacity`` ((instance type, zone)) never have capacity: their
overrides are dropped from every CreateFleet and reported in its ``errorSet`` (partial results
when other pools remain), as ``tests/cloud/aws/conftest.py`` does for the provider tests. Every
request is recorded with its arrival time, so call rates per API per minute can be read off.
"""

from __future__ import annotations

import collections
import http.client
import http.server
import random
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.providers.aws.cloud.conftest import Capacity, _error_items, _rewrite_fleet

FAULTS = ("ice", "throttle", "5xx", "reset", "timeout")

_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
    "<Message>{message}</Message></Error></Errors><RequestID>fault</RequestID></Response>"
)


@dataclass
class Plan:
    """What to inject; shared with the proxy's threads (read under ``lock``)."""

    rates: dict[str, dict[str, float]] = field(default_factory=dict)  # action → fault → p
    no_capacity: set[tuple[str, str]] = field(default_factory=set)
    forced: dict[str, list[str]] = field(default_factory=dict)  # action → first calls' faults
    hold_s: float = 2.0
    seed: int = 0
    enabled: bool = False
    calls: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, action)
    injected: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def draw(self, action: str) -> str:
        """The fault for this request ("" for none), counted."""
        with self.lock:
            self.calls.append((time.monotonic(), action))
            if not self.enabled:
                return ""
            if self.forced.get(action):
                fault = self.forced[action].pop(0)
                self.injected[(action, fault)] += 1
                return fault
            rates = self.rates.get(action, self.rates.get("*", {}))
            roll = self._rng.random()
            for fault in FAULTS:
                p = rates.get(fault, 0.0)
                if fault == "ice" and action != "CreateFleet":
                    continue
                if roll < p:
                    self.injected[(action, fault)] += 1
                    return fault
                roll -= p
            return ""

    def per_minute(self, since: float = 0.0) -> dict[str, int]:
        """The most calls each action got in any 60 s window starting at a call."""
        with self.lock:
            by_action: dict[str, list[float]] = collections.defaultdict(list)
            for at, action in self.calls:
                if at >= since:
                    by_action[action].append(at)
        peak = {}
        for action, times in by_action.items():
            times.sort()
            best, j = 0, 0
            for i, start in enumerate(times):
                while j < len(times) and times[j] < start + 60.0:
                    j += 1
                best = max(best, j - i)
            peak[action] = best
        return peak


def _ice_answer(params: list[tuple[str, str]]) -> str:
    _, dropped, _ = _rewrite_fleet(params, _all_pools(params))
    lifecycle = dict(params).get(
        "TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand"
    )
    extra = _error_items(dropped, lifecycle, Capacity())
    return (
        '<?xml version="1.0" encoding="UTF-8"?><CreateFleetResponse '
        'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId>'
        f"<fleetId>fleet-ice</fleetId>{extra}<fleetInstanceSet/></CreateFleetResponse>"
    )


def _all_pools(params: list[tuple[str, str]]) -> set[tuple[str, str]]:
    fields: dict[tuple[str, str], dict[str, str]] = collections.defaultdict(dict)
    for key, value in params:
        parts = key.split(".")
        if len(parts) >= 5 and parts[0] == "LaunchTemplateConfigs" and parts[2] == "Overrides":
            fields[(parts[1], parts[3])][parts[4]] = value
    return {(f.get("InstanceType", ""), f.get("AvailabilityZone", "")) for f in fields.values()}


_FAULT_ANSWERS = {
    "throttle": ("RequestLimitExceeded", 503, "Request limit exceeded."),
    "5xx": ("InternalError", 500, "An internal error has occurred"),
}


class _Reset(Exception):
    """Drop the connection without an answer."""


class _Handler(http.server.BaseHTTPRequestHandler):
    """Forwards to moto or answers with the fault the plan draws."""

    plan: Plan
    target: urllib.parse.ParseResult

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        params = urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)
        action = dict(params).get("Action", "")
        fault = self.plan.draw(action)
        if fault:
            return self._inject(fault, params)
        self._forward(action, body, params)

    def _inject(self, fault: str, params: list[tuple[str, str]]) -> None:
        if fault in ("reset", "timeout"):
            if fault == "timeout":
                time.sleep(self.plan.hold_s)
            self._reset()
        code, status, message = _FAULT_ANSWERS.get(fault, ("", 200, ""))
        if code:
            return self._reply(status, _ERROR.format(code=code, message=message))
        self._reply(200, _ice_answer(params))  # "ice"

    def _forward(self, action: str, body: bytes, params: list[tuple[str, str]]) -> None:
        extra = ""
        if action == "CreateFleet" and "DryRun" not in dict(params):
            with self.plan.lock:
                empty = set(self.plan.no_capacity)
            kept, dropped, _ = _rewrite_fleet(params, empty)
            if dropped:
                lifecycle = dict(params).get(
                    "TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand"
                )
                extra = _error_items(dropped, lifecycle, Capacity())
                if not any(".Overrides." in k for k, _ in kept):
                    return self._reply(200, _ice_answer(params))
                body = urllib.parse.urlencode(kept).encode()
        conn = http.client.HTTPConnection(
            self.target.hostname or "127.0.0.1", self.target.port, timeout=60
        )
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
        }
        headers["Content-Length"] = str(len(body))
        conn.request("POST", self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read().decode()
        conn.close()
        if extra:
            data = data.replace("<fleetInstanceSet>", extra + "<fleetInstanceSet>", 1)
        self._reply(resp.status, data)

    def _reply(self, status: int, text: str) -> None:
        raw = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends RST, which the client sees as "connection reset"
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        raise _Reset


def _handler(upstream: str, plan: Plan) -> type[http.server.BaseHTTPRequestHandler]:
    attrs = {"plan": plan, "target": urllib.parse.urlparse(upstream)}
    return type("Handler", (_Handler,), attrs)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # resets are on purpose


@contextmanager
def ec2_fault_proxy(upstream: str, plan: Plan) -> Iterator[str]:
    """Serve the proxy on loopback; yields its URL."""
    server = _Server(("127.0.0.1", 0), _handler(upstream, plan))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
