"""A 2026-07-28 MCP server on stdio that never finishes its one tool, for the CLI's signal tests.

  hang_server.py PID_FILE [--ignore-term]

`tools/call hang` writes the server's pid to PID_FILE and never answers. The server ignores
stdin closing (it stays until it is killed) and SIGINT; with --ignore-term it ignores SIGTERM
too, so only SIGKILL stops it.
"""
import json
import os
import signal
import sys
import time

pid_file = sys.argv[1]
signal.signal(signal.SIGINT, signal.SIG_IGN)
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

META = {"io.modelcontextprotocol/serverInfo": {"name": "hang", "version": "1"}}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request):
    method = request.get("method")
    if method == "server/discover":
        return {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public", "_meta": META}
    if method == "tools/list":
        return {"resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                "tools": [{"name": "hang", "inputSchema": {"type": "object"}}], "_meta": META}
    if method == "tools/call":
        with open(pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        return None
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
# stdin closed: stay, as a server with work in flight might.
while True:
    time.sleep(3600)
