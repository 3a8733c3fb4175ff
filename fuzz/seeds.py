#!/usr/bin/env python3
"""Writes fuzz/seeds/TARGET/ from the official 2026-07-28 examples (crates/toolwire-protocol/
tests/fixtures/examples) and requests for the fuzz fixture server's tools (the shapes the
conformance fixtures exercise: typed and raw schemas, x-mcp-header parameters, input-required
rounds with request state, pages, resource templates). Run by fuzz/run; the seeds are not kept
in git."""

import base64
import hashlib
import json
import pathlib
import sys

FUZZ = pathlib.Path(__file__).resolve().parent
EXAMPLES = FUZZ.parent / "crates/toolwire-protocol/tests/fixtures/examples"
OUT = FUZZ / "seeds"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
}


def request(i, method, params):
    params = dict(params)
    params["_meta"] = {**META, **params.get("_meta", {})}
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": params}


def fixture_requests():
    """Requests for the tools, resources and pages of fuzz/src/lib.rs."""
    return [
        request(1, "tools/call", {"name": "person", "arguments": {"name": "Ada", "age": 36, "tags": ["x"]}}),
        request(2, "tools/call", {"name": "headers", "arguments": {"region": "eu", "priority": 3, "flag": True}}),
        request(3, "tools/call", {"name": "ask", "arguments": {}}),
        request(4, "tools/call", {"name": "ask", "arguments": {}, "requestState": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                                  "inputResponses": {"who": {"action": "accept", "content": {"name": "Bo"}}}}),
        request(5, "tools/list", {}),
        request(6, "tools/list", {"cursor": "AQAAAAR4eHh4eHh4eHh4eHh4eHh4eHh4"}),
        request(7, "resources/read", {"uri": "files://a/b/c.txt"}),
        request(8, "resources/read", {"uri": "notes://one"}),
        request(9, "resources/templates/list", {}),
        request(10, "server/discover", {}),
        request(11, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
        request(12, "tools/call", {"name": "filler_3", "arguments": {}, "_meta": {"progressToken": "p"}}),
    ]


def examples():
    for path in sorted(EXAMPLES.rglob("*.json")):
        yield path.parent.name, json.loads(path.read_text())


def headers_for(message):
    method = message.get("method", "")
    params = message.get("params") or {}
    lines = ["content-type: application/json", "accept: application/json, text/event-stream",
             "mcp-protocol-version: 2026-07-28", f"mcp-method: {method}"]
    name = params.get("name") or params.get("uri")
    if isinstance(name, str):
        lines.append(f"mcp-name: {name}")
    args = params.get("arguments") or {}
    if isinstance(args, dict):
        for key, header in (("region", "Region"), ("priority", "Priority"), ("flag", "Flag")):
            if key in args:
                value = json.dumps(args[key]) if not isinstance(args[key], str) else args[key]
                lines.append(f"mcp-param-{header}: {value}")
    return "\n".join(lines)


def main():
    seeds = {}

    def add(target, data):
        if isinstance(data, (dict, list)):
            data = json.dumps(data, separators=(",", ":"))
        if isinstance(data, str):
            data = data.encode()
        seeds.setdefault(target, []).append(data)

    messages = [m for _, m in examples() if isinstance(m, dict) and "jsonrpc" in m]
    messages += fixture_requests()
    for m in messages:
        for target in ("message", "frame"):
            add(target, m)
        add("http", headers_for(m) + "\n\n" + json.dumps(m))
        meta = (m.get("params") or {}).get("_meta")
        if meta is not None:
            add("meta", meta)
    for kind, example in examples():
        if kind == "Tool":
            for key in ("inputSchema", "outputSchema"):
                if key in example:
                    add("schema", example[key])
                    add("headers", example[key])
        if kind in ("StringSchema", "NumberSchema", "BooleanSchema") or kind.endswith("EnumSchema"):
            add("schema", {"type": "object", "properties": {"v": example}})
    add("headers", {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "object", "properties": {"depth": {"type": "integer", "x-mcp-header": "Depth"}}}},
        "region": "eu", "n": {"depth": 42}})
    for value in ("plain", " edge ", "=?base64?aGVsbG8=?=", "caf\u00e9", "tab\there"):
        add("headers", value)
    for text in ("files://{dir}/{+name}\nfiles://a/b/c", "notes://{key}\nnotes://k", "x://{a}{b}\nx://ab"):
        add("uri_template", text)
    for event in ("event: message\ndata: {\"a\":1}\n\n", ": comment\r\ndata: x\rdata: y\n\n", "data:\n\nid: 1\nretry: 5\n\n"):
        add("sse", b"\x03" + event.encode())
    for lines in ("{\"a\":1}\n{\"b\":2}\n", "\r\n\n" + "x" * 2000 + "\nok\n"):
        add("lines", b"\x07" + lines.encode())
    b64 = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    claims = {"iss": "https://issuer.example", "aud": ["https://mcp.example/mcp"], "sub": "u1",
              "exp": 1900000000, "nbf": 1700000000, "scope": "tools:read tools:write", "client_id": "c"}
    add("jwt", b64({"alg": "RS256", "typ": "at+jwt", "kid": "k1"}) + "." + b64(claims) + ".c2ln")
    add("jwt", claims)
    add("cursor", "AQAAAAR4eHh4eHh4eHh4eHh4eHh4eHh4")
    for lines in ('for=192.0.2.60;proto=http;by=203.0.113.43', 'For="[2001:db8:cafe::17]:4711", for=unknown',
                  'for=_hidden;host="a,b\\"c"\nfor="192.0.2.43:47011"', '203.0.113.9, 2001:db8::1'):
        add("forwarded", lines)
    add("request_state", json.dumps({"m": "tools/call", "n": "t", "d": "00" * 32, "e": 5, "s": {"k": 1}}))
    for target, items in seeds.items():
        directory = OUT / target
        directory.mkdir(parents=True, exist_ok=True)
        for data in items:
            (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)
    print(f"seeds: {sum(len(v) for v in seeds.values())} inputs for {len(seeds)} targets", file=sys.stderr)


if __name__ == "__main__":
    main()
