#!/usr/bin/env python3
"""Regenerates karpenter/providers/aws/core/data/vpc_limits.json.gz from the VPC resource controller.

Upstream Karpenter compiles the VPC resource controller's static per-instance-type table
(``pkg/aws/vpc/limits.go`` in github.com/aws/amazon-vpc-resource-controller-k8s) into
``zz_generated.vpclimits.go``; it is where ``vpc.amazonaws.com/pod-eni`` (branch interfaces)
and Windows' ``vpc.amazonaws.com/PrivateIPv4Address`` come from, since EC2's API does not
publish branch-interface limits. We keep the same facts as a small JSON file instead of code.

Why the Go module proxy: the build machines reach proxy.golang.org but not GitHub. The module
zip is checked against the pinned ``h1:`` hash (the go.sum algorithm) before it is read, so a
rerun at the same version either reproduces the committed file byte for byte or fails.

Usage (stdlib only, no Go toolchain needed):

    python3 hack/gen-vpc-limits.py            # writes the data file
    python3 hack/gen-vpc-limits.py --check    # exits 1 when the committed file is stale

Bumping: set VERSION to a new tag, run once with H1 set to "" to print the new hash (from the
proxy, checked by nothing), compare it with ``go mod download -json MODULE@VERSION`` (which
verifies against the checksum database), then pin it here and rerun.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import io
import json
import re
import sys
import urllib.request
import zipfile
from pathlib import Path

MODULE = "github.com/aws/amazon-vpc-resource-controller-k8s"
VERSION = "v1.8.2"
H1 = "h1:S6fvZf7+Xjho4LLo2AdxT3x9yaOJ37Ly/eGQd+ASWi4="  # go.sum hash of the module zip
SOURCE = "pkg/aws/vpc/limits.go"
PROXY = "https://proxy.golang.org"
OUTPUT = (
    Path(__file__).resolve().parent.parent / "karpenter/providers/aws/core/data/vpc_limits.json.gz"
)
COMMAND = "python3 hack/gen-vpc-limits.py"

# Go tokens of the subset limits.go uses: composite literals of strings, ints and bools.
_TOKEN = re.compile(
    r"""\s+|//[^\n]*|(?P<str>"(?:[^"\\]|\\.)*")|(?P<int>-?\d+)|(?P<ident>[A-Za-z_][\w.]*)"""
    r"""|(?P<punct>[{}\[\]:,*])"""
)


def download() -> bytes:
    """The module zip from the proxy, verified against the pinned hash."""
    url = f"{PROXY}/{MODULE.lower()}/@v/{VERSION}.zip"
    with urllib.request.urlopen(url, timeout=120) as resp:
        blob: bytes = resp.read()
    got = h1(blob)
    if got != H1:
        sys.exit(f"gen-vpc-limits: {MODULE}@{VERSION} hashes to {got}, pinned {H1!r}")
    return blob


def h1(blob: bytes) -> str:
    """Go's dirhash Hash1 of a module zip: sha256 over sorted "sha256  name" lines."""
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        names = sorted(n for n in zf.namelist() if not n.endswith("/"))
        summary = "".join(f"{hashlib.sha256(zf.read(n)).hexdigest()}  {n}\n" for n in names)
    return "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs; anything outside the expected subset is an error, not a skip."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            sys.exit(f"gen-vpc-limits: unexpected Go syntax at {text[pos : pos + 40]!r}")
        pos = m.end()
        if m.lastgroup:
            out.append((m.lastgroup, m.group()))
    return out


class Parser:
    """Recursive descent over a Go composite literal: ``Type{key: value, ...}`` or a list."""

    def __init__(self, toks: list[tuple[str, str]]) -> None:
        self.toks = toks
        self.i = 0

    def take(self, text: str | None = None) -> tuple[str, str]:
        tok = self.toks[self.i]
        if text is not None and tok[1] != text:
            sys.exit(f"gen-vpc-limits: expected {text!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def peek(self) -> str:
        return self.toks[self.i][1]

    def value(self) -> object:
        kind, text = self.toks[self.i]
        if kind == "str":
            self.i += 1
            return json.loads(text)  # Go's escapes in these names are JSON's
        if kind == "int":
            self.i += 1
            return int(text)
        if text in ("true", "false"):
            self.i += 1
            return text == "true"
        return self.composite()

    def composite(self) -> object:
        # an optional type before the brace: []T, map[K]V, *T or T (elided inside lists)
        prefix = []
        while self.peek() != "{":
            prefix.append(self.take()[1])
        self.take("{")
        items: list[object] = []
        fields: dict[str, object] = {}
        while self.peek() != "}":
            if self.toks[self.i + 1][1] == ":":
                kind, key = self.take()  # a map key (string) or a struct field name
                self.take(":")
                fields[json.loads(key) if kind == "str" else key] = self.value()
            else:
                items.append(self.value())
            if self.peek() == ",":
                self.take(",")
        self.take("}")
        if fields and items:
            sys.exit("gen-vpc-limits: a literal mixes keyed and positional elements")
        if items or (not fields and prefix[:1] == ["["]):
            return items  # an empty []T{} is still a list
        return fields


def parse_limits(source: str) -> dict[str, object]:
    """The ``Limits`` map literal of limits.go as plain JSON values, keyed by instance type."""
    start = source.find("var Limits = ")
    if start < 0:
        sys.exit(f"gen-vpc-limits: no `var Limits` in {SOURCE}")
    parser = Parser(tokens(source[start + len("var Limits = ") :]))
    table = parser.composite()
    if not isinstance(table, dict) or len(table) < 500:
        sys.exit(f"gen-vpc-limits: {SOURCE} yielded {len(table)} types, expected hundreds")
    return dict(sorted(table.items()))


def render(table: dict[str, object]) -> bytes:
    """Deterministic gzip (mtime 0) of the table plus where it came from."""
    doc = {
        "source": {"module": MODULE, "version": VERSION, "sum": H1, "path": SOURCE},
        "generatedBy": COMMAND,
        "types": table,
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as fh:
        fh.write(text.encode())
    return buf.getvalue()


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--check", action="store_true", help="fail when the file is stale")
    opts = args.parse_args()
    with zipfile.ZipFile(io.BytesIO(download())) as zf:
        source = zf.read(f"{MODULE}@{VERSION}/{SOURCE}").decode()
    blob = render(parse_limits(source))
    if opts.check:
        stale = not OUTPUT.exists() or OUTPUT.read_bytes() != blob
        print(f"{OUTPUT}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_bytes(blob)
    print(f"{OUTPUT}: {len(blob)} bytes from {MODULE}@{VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
