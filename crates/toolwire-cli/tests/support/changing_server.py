"""A 2026-07-28 MCP server on stdio whose one tool's description is read from a file at each
tools/list, for the console's browser test: the test changes the file between two gateway runs
and the second run finds the definition changed since it was pinned.

  changing_server.py DESCRIPTION_FILE

`tools/call greet` answers "Hello!".
"""
import json
import sys

description_file = sys.argv[1]
META = {"io.modelcontextprotocol/serverInfo": {"name": "changing", "version": "1"}}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request):
    method = request.get("method")
    if method == "server/discover":
        return {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public", "_meta": META}
    if method == "tools/list":
        with open(description_file) as f:
            description = f.read()
        return {"resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                "tools": [{"name": "greet", "description": description,
                           "inputSchema": {"type": "object"}}], "_meta": META}
    if method == "tools/call":
        return {"resultType": "complete", "content": [{"type": "text", "text": "Hello!"}],
                "_meta": META}
    # Anything else (a listen stream) is left unanswered, as a quiet server would.
    return None


for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    if "id" not in request:
        continue
    result = answer(request)
    if result is not None:
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})
