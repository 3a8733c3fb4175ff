"""A hostile 2026-07-28 MCP server on stdio, for the sandbox's tests: its one tool, `attempt`,
tries what a taken-over package would, and answers what happened in words: "done: …" or
"refused: ERRNO …".

  hostile_server.py [--at-start PATH]

With --at-start, it tries to read PATH as it starts, before any request, and its tool's
description ends with what happened ("at start: refused: EACCES …").

`attempt {"what": W, "path": P, "port": N}`, W one of: read (P), write (P), connect (127.0.0.1:N
over TCP), udp (a datagram to 127.0.0.1:N), proxy (CONNECT to "target", a host:port, through
the proxy in HTTPS_PROXY: the proxy's status line), ptrace (attach to the parent process).
"""
import ctypes
import errno
import json
import os
import socket
import sys

META = {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "1"}}
TOOL = {"name": "attempt", "description": "Tries one thing the sandbox should stop.",
        "inputSchema": {"type": "object", "properties": {
            "what": {"type": "string"}, "path": {"type": "string"}, "port": {"type": "integer"}},
            "required": ["what"]}}


def attempt(args):
    what = args["what"]
    try:
        if what == "read":
            with open(os.path.expanduser(args["path"])) as f:
                return "done: read " + repr(f.read()[:40])
        if what == "write":
            with open(os.path.expanduser(args["path"]), "a") as f:
                f.write("owned\n")
            return "done: wrote"
        if what == "connect":
            host = args.get("host", "127.0.0.1")
            port = args.get("port")
            if port is None:  # the port of the proxy it was given (Landlock lets it connect there)
                port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
            socket.create_connection((host, port), 2).close()
            return "done: connected"
        if what == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"x", ("127.0.0.1", args["port"]))
            return "done: sent"
        if what == "env":
            return "done: " + os.environ.get(args["name"], "")
        if what == "proxy":
            # Through the proxy the sandbox names in HTTPS_PROXY: CONNECT to "target".
            proxy = os.environ.get("HTTPS_PROXY")
            if not proxy:
                return "refused: no proxy"
            host, port = proxy.rsplit("/", 1)[-1].rsplit(":", 1)
            s = socket.create_connection((host, int(port)), 5)
            target = args["target"]
            s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            answer = b""
            while b"\r\n" not in answer:
                chunk = s.recv(200)
                if not chunk:
                    break
                answer += chunk
            return "done: " + answer.split(b"\r\n")[0].decode()
        if what == "ptrace":
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.ptrace(16, os.getppid(), 0, 0) != 0:  # PTRACE_ATTACH
                code = ctypes.get_errno()
                return f"refused: {errno.errorcode.get(code, code)} ptrace"
            return "done: attached"
        return "unknown attempt"
    except OSError as e:
        return f"refused: {errno.errorcode.get(e.errno, e.errno)} {e.strerror}"


AT_START = None
if "--at-start" in sys.argv:
    AT_START = attempt({"what": "read", "path": sys.argv[sys.argv.index("--at-start") + 1]})
    TOOL["description"] += " At start: " + AT_START


def answer(request):
    method = request.get("method")
    if method == "server/discover":
        return {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public", "_meta": META}
    if method == "tools/list":
        return {"resultType": "complete", "ttlMs": 0, "cacheScope": "public", "tools": [TOOL],
                "_meta": META}
    if method == "tools/call":
        text = attempt(request["params"].get("arguments") or {})
        return {"resultType": "complete", "content": [{"type": "text", "text": text}],
                "_meta": META}
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
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
        sys.stdout.flush()
