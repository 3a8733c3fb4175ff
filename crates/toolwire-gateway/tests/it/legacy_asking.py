"""A 2025-11-25 MCP server on stdio whose one tool, `ask`, asks the client for a name with an
elicitation/create request in the middle of the call, and answers with what became of it:
`answered NAME`, or (as an error result) `refused: MESSAGE` with the client's error.
It answers anything it does not know, server/discover included, with -32601."""
import json
import sys

QUESTION_ID = "ask-1"


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id, result):
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main():
    calls = {}
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None:
            call_id = calls.pop(request_id, None)
            if call_id is None:
                continue
            error = message.get("error")
            if error:
                text, failed = "refused: " + error.get("message", ""), True
            else:
                text, failed = "answered " + json.dumps(message.get("result")), False
            answer(call_id, {"content": [{"type": "text", "text": text}], "isError": failed})
        elif method == "initialize":
            answer(request_id, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-asking", "version": "1"},
            })
        elif method == "tools/list":
            answer(request_id, {"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]})
        elif method == "tools/call":
            calls[QUESTION_ID] = request_id
            send({"jsonrpc": "2.0", "id": QUESTION_ID, "method": "elicitation/create", "params": {
                "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
            }})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "Method not found"}})


main()
