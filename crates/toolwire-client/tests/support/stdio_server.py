"""A small 2026-07-28 MCP server on stdio for the client's transport tests.

It logs a line to stderr for every request (a server whose stderr breaks dies of EPIPE, as many
do), and its tools make it misbehave on request:
  pid           -> its process id
  echo          -> `text`, exactly as given (escape sequences and all)
  env           -> its environment, as a JSON object
  long_stderr   -> a stderr line of `bytes` bytes (default 100 KiB), then the answer
  long_stdout   -> a stdout line of `bytes` bytes that is not JSON, then the answer
  progress      -> `count` progress notifications, then the answer
  flood         -> `count` notifications of `method` (on the latest subscription when
                   `subscription` is true, else unsolicited), then the answer
  helper        -> starts `sleep 1000` as a child and answers its pid
Flags: --ignore-eof keeps the process alive after stdin closes (as servers with open handles do).
"""
import json
import os
import subprocess
import sys
import time

TOOLS = ["pid", "echo", "env", "long_stderr", "long_stdout", "progress", "flood", "helper"]

# The id of the latest subscriptions/listen request, which tags its notifications.
subscription = None


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def call(name, args, request_id):
    if name == "pid":
        return str(os.getpid())
    if name == "echo":
        return args.get("text", "")
    if name == "env":
        return json.dumps(dict(os.environ))
    if name == "long_stderr":
        log("e" * args.get("bytes", 100 << 10))
        return "wrote a long stderr line"
    if name == "long_stdout":
        sys.stdout.write("o" * args.get("bytes", 100 << 10) + "\n")
        sys.stdout.flush()
        return "wrote a long stdout line"
    if name == "progress":
        count = args.get("count", 1)
        lines = (
            json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": request_id, "progress": i + 1, "total": count}})
            for i in range(count)
        )
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        return "progressed"
    if name == "flood":
        method = args.get("method", "notifications/tools/list_changed")
        params = dict(args.get("params", {}))
        if args.get("subscription"):
            params["_meta"] = {"io.modelcontextprotocol/subscriptionId": subscription}
        line = json.dumps({"jsonrpc": "2.0", "method": method, "params": params})
        sys.stdout.write((line + "\n") * args.get("count", 1))
        sys.stdout.flush()
        return "flooded"
    if name == "helper":
        helper = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return str(helper.pid)
    raise ValueError(name)


def answer(request):
    method = request["method"]
    log(f"handling {method}")
    if method == "server/discover":
        return {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "stdio-test-server", "version": "1"},
                "ttlMs": 0, "cacheScope": "public"}
    if method == "tools/list":
        return {"resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}
    if method == "tools/call":
        params = request["params"]
        text = call(params["name"], params.get("arguments") or {}, request["id"])
        return {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    if method == "subscriptions/listen":
        global subscription
        subscription = request["id"]
        send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
              "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": request["id"]},
                         "notifications": request["params"].get("notifications", {})}})
        return None
    return None


def main():
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue
        result = answer(request)
        if result is not None:
            send({"jsonrpc": "2.0", "id": request["id"], "result": result})
    if "--ignore-eof" in sys.argv:
        time.sleep(1000)


main()
