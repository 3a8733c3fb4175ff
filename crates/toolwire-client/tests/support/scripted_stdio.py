"""A scripted MCP server on stdio: it answers each request with the messages a test wrote down.

Usage: scripted_stdio.py SCRIPT_JSON [LOG_FILE]

SCRIPT_JSON maps a key to the list of messages sent back, in order. The key is the method,
"tools/call:NAME" for one tool, or "METHOD@CURSOR" for a page asked for with that cursor (each
looked up before the method alone); a retry carrying `inputResponses` or `requestState` looks up
"KEY#retry" first. A key may map to {"each": [LIST, LIST, ...]} instead: its first request
gets the first list, the next the next, and the last list answers the rest. A missing key answers -32601; an empty list answers nothing at all (a server
that stays silent). In a message, a string "{ID}" becomes the request's id, "{ID}" inside a
longer string the id as text, and "{INPUT_RESPONSES}" the request's `inputResponses` serialized
as JSON; a message with `result`
or `error` gets `jsonrpc` and `id`, any other is written as given (a notification) after
`jsonrpc` is added; {"stderr": TEXT} writes TEXT as a line to stderr and {"raw": TEXT} as a
line to stdout, as it is. Every message received is appended to LOG_FILE, one JSON line each, before
anything is answered, so a test can count requests once the client is done.
"""
import json
import sys


def substitute(value, request):
    if value == "{ID}":
        return request.get("id")
    if isinstance(value, str) and "{ID}" in value:
        return value.replace("{ID}", str(request.get("id")))
    if value == "{INPUT_RESPONSES}":
        return json.dumps(request.get("params", {}).get("inputResponses"), sort_keys=True)
    if isinstance(value, dict):
        return {k: substitute(v, request) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, request) for v in value]
    return value


def keys(request):
    method = request.get("method", "")
    params = request.get("params") or {}
    base = [method]
    if method == "tools/call":
        base.insert(0, "tools/call:" + str(params.get("name")))
    if "cursor" in params:
        base.insert(0, method + "@" + str(params["cursor"]))
    if "inputResponses" in params or "requestState" in params:
        base = [k + "#retry" for k in base] + base
    return base


def main():
    script = json.loads(sys.argv[1])
    log = open(sys.argv[2], "a") if len(sys.argv) > 2 else None
    served = {}
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if log:
            log.write(json.dumps(request) + "\n")
            log.flush()
        if "id" not in request or "method" not in request:
            continue
        key = next((k for k in keys(request) if k in script), None)
        replies = script[key] if key is not None else None
        if isinstance(replies, dict) and "each" in replies:
            nth = served.get(key, 0)
            served[key] = nth + 1
            replies = replies["each"][min(nth, len(replies["each"]) - 1)]
        if replies is None:
            replies = [{"error": {"code": -32601, "message": "Method not found"}}]
        for reply in replies:
            if "stderr" in reply:
                sys.stderr.write(reply["stderr"] + "\n")
                sys.stderr.flush()
                continue
            if "raw" in reply:
                sys.stdout.write(reply["raw"] + "\n")
                sys.stdout.flush()
                continue
            message = {"jsonrpc": "2.0"}
            if "result" in reply or "error" in reply:
                message["id"] = request["id"]
            message.update(substitute(reply, request))
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()


main()
