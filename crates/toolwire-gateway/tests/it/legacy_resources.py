"""A 2025-11-25 MCP server on stdio that offers two resources and lets clients subscribe to
them (`resources.subscribe`), announcing no list changes. Its tools:
- `subscribed`: the URIs subscribed to now, sorted, as a JSON list;
- `touch` (`uri`): sends `notifications/resources/updated` for `uri`, then answers `touched`.
It answers anything it does not know, server/discover included, with -32601."""
import json
import sys

RESOURCES = ["file:///README.md", "file:///CHANGES.md"]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id, result):
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text(request_id, value):
    answer(request_id, {"content": [{"type": "text", "text": value}], "isError": False})


def main():
    subscribed = set()
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method is None or request_id is None:
            continue
        if method == "initialize":
            answer(request_id, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "resources": {"subscribe": True}},
                "serverInfo": {"name": "legacy-resources", "version": "1"},
            })
        elif method == "tools/list":
            answer(request_id, {"tools": [
                {"name": "subscribed", "inputSchema": {"type": "object"}},
                {"name": "touch", "inputSchema": {
                    "type": "object", "properties": {"uri": {"type": "string"}}}},
            ]})
        elif method == "tools/call" and params.get("name") == "subscribed":
            text(request_id, json.dumps(sorted(subscribed)))
        elif method == "tools/call" and params.get("name") == "touch":
            uri = params.get("arguments", {}).get("uri")
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                  "params": {"uri": uri}})
            text(request_id, "touched")
        elif method == "resources/list":
            answer(request_id, {"resources": [
                {"uri": uri, "name": uri.rsplit("/", 1)[-1]} for uri in RESOURCES
            ]})
        elif method == "resources/read":
            uri = params.get("uri")
            answer(request_id, {"contents": [{"uri": uri, "text": "old " + uri}]})
        elif method == "resources/subscribe":
            subscribed.add(params.get("uri"))
            answer(request_id, {})
        elif method == "resources/unsubscribe":
            subscribed.discard(params.get("uri"))
            answer(request_id, {})
        else:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "Method not found"}})


main()
