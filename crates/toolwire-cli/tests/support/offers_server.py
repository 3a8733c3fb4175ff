"""A 2026-07-28 MCP server on stdio with something of every kind, for the gateway's security
tests: a tool `dump_db`, a prompt `playbook`, a resource `file:///etc/secret.txt` and a template
`file:///{+path}`, each of whose answers names this server and what was asked, so that a test
can tell what reached a caller.

  offers_server.py NAME [DESCRIPTIONS_FILE]

DESCRIPTIONS_FILE, when given, is a JSON object read at every list: {"tool": ..., "prompt":
..., "resource": ..., "template": ..., "extra_tool": NAME} replaces those descriptions (and
adds a second tool named `extra_tool`), so that a test can change a definition under a running
gateway. `completion/complete` offers "alpha" for anything.
"""
import json
import sys

name = sys.argv[1]
descriptions_file = sys.argv[2] if len(sys.argv) > 2 else None
META = {"io.modelcontextprotocol/serverInfo": {"name": name, "version": "1"}}
LISTED = {"resultType": "complete", "ttlMs": 0, "cacheScope": "public", "_meta": META}


def descriptions():
    said = {"tool": "Dumps the database.", "prompt": "The incident playbook.",
            "resource": "The secret file.", "template": "Any file."}
    if descriptions_file:
        try:
            with open(descriptions_file) as f:
                said.update(json.load(f))
        except (OSError, ValueError):
            pass
    return said


def text(words):
    return [{"type": "text", "text": words}]


def answer(request):
    method = request.get("method")
    params = request.get("params") or {}
    said = descriptions()
    if method == "server/discover":
        return {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "prompts": {}, "resources": {}, "completions": {}},
                "ttlMs": 0, "cacheScope": "public", "_meta": META}
    if method == "tools/list":
        tools = [{"name": "dump_db", "description": said["tool"],
                  "inputSchema": {"type": "object"}}]
        if said.get("extra_tool"):
            tools.append({"name": said["extra_tool"], "description": "A new tool.",
                          "inputSchema": {"type": "object"}})
        return dict(LISTED, tools=tools)
    if method == "tools/call":
        return {"resultType": "complete", "_meta": META,
                "content": text(f"{name} ran {params.get('name')}")}
    if method == "prompts/list":
        return dict(LISTED, prompts=[{"name": "playbook", "description": said["prompt"],
                                      "arguments": [{"name": "topic", "required": False}]}])
    if method == "prompts/get":
        return {"resultType": "complete", "_meta": META,
                "messages": [{"role": "user", "content": {
                    "type": "text", "text": f"{name} playbook: the root password is hunter2"}}]}
    if method == "resources/list":
        return dict(LISTED, resources=[{"uri": "file:///etc/secret.txt", "name": "secret",
                                        "description": said["resource"]}])
    if method == "resources/templates/list":
        return dict(LISTED, resourceTemplates=[{"uriTemplate": "file:///{+path}", "name": "files",
                                                "description": said["template"]}])
    if method == "resources/read":
        uri = params.get("uri")
        return {"resultType": "complete", "_meta": META,
                "contents": [{"uri": uri, "mimeType": "text/plain",
                              "text": f"{name} SECRET of {uri}"}]}
    if method == "completion/complete":
        return {"resultType": "complete", "_meta": META,
                "completion": {"values": ["alpha"], "total": 1, "hasMore": False}}
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
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
                         + "\n")
        sys.stdout.flush()
