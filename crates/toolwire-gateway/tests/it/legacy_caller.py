"""A 2025-11-25 MCP client over Streamable HTTP: initializes a session at URL, calls TOOL, and
answers the server's requests on the call's stream (a form with the name "Ada", or
"Lovelace" when it asks for a family name; a sampling request with "hi"); prints the call's
response, and each request it answered on stderr. Usage: legacy_caller.py URL TOOL"""
import json
import sys
import urllib.request

URL, TOOL = sys.argv[1], sys.argv[2]
VERSION = "2025-11-25"
session = None


def post(message):
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = VERSION
    request = urllib.request.Request(URL, json.dumps(message).encode(), headers, method="POST")
    return urllib.request.urlopen(request, timeout=20)


def messages(response):
    """The JSON-RPC messages of a response: its body, or its SSE events' data."""
    if not response.headers.get("Content-Type", "").startswith("text/event-stream"):
        body = response.read()
        if body:
            yield json.loads(body)
        return
    data = []
    for line in response:
        line = line.decode().rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def answer(request):
    method, params = request["method"], request.get("params", {})
    if method == "elicitation/create":
        name = "Lovelace" if "family" in params.get("message", "") else "Ada"
        return {"action": "accept", "content": {"name": name}}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    if method == "roots/list":
        return {"roots": [{"uri": "file:///srv/project"}]}
    return None


def main():
    global session
    response = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION,
        "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
        "clientInfo": {"name": "legacy-caller", "version": "1"},
    }})
    session = response.headers.get("Mcp-Session-Id")
    list(messages(response))
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}).read()
    response = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": TOOL, "arguments": {}}})
    for message in messages(response):
        if message.get("id") == 2 and "method" not in message:
            print(json.dumps(message))
            return
        if "method" in message and "id" in message:
            result = answer(message)
            sys.stderr.write("answered " + message["method"] + "\n")
            reply = {"jsonrpc": "2.0", "id": message["id"]}
            if result is None:
                reply["error"] = {"code": -32601, "message": "not handled"}
            else:
                reply["result"] = result
            post(reply).read()
    print(json.dumps({"error": "the stream ended before the response"}))


main()
