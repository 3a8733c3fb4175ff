"""A 2025-11-25 MCP server on stdio whose tools ask the client mid-call, with a server->client
request on the open call, and answer with what became of it:
- `ask`: elicitation/create for a name; `answered RESULT`, or (as an error result)
  `refused: MESSAGE` with the client's error;
- `sample`: sampling/createMessage; `answered RESULT` or `refused: MESSAGE`;
- `roots`: roots/list; `answered RESULT` or `refused: MESSAGE`;
- `twice`: two elicitations, one after the other; `answered FIRST then SECOND`.
Each question has an id of its own, so calls may overlap. It answers anything it does not
know, server/discover included, with -32601. With --task-only-tool it also lists `research`,
which it runs only as a task (execution.taskSupport "required"), as server-everything's
simulate-research-query is. With --roots-at-start it asks roots/list once initialized, outside
any call, as server-filesystem does, and its tool `start_roots` says what it was answered."""
import json
import sys

NAME_FORM = {
    "message": "Your name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}
QUESTIONS = {
    "ask": [("elicitation/create", NAME_FORM)],
    "sample": [("sampling/createMessage", {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
        "maxTokens": 20,
    })],
    "roots": [("roots/list", {})],
    "twice": [("elicitation/create", NAME_FORM),
              ("elicitation/create", {**NAME_FORM, "message": "Your family name?"})],
}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id, result):
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main():
    calls = {}
    asked = 0

    def ask(call):
        nonlocal asked
        asked += 1
        question_id = "q-%d" % asked
        calls[question_id] = call
        method, params = call["questions"][len(call["answers"])]
        send({"jsonrpc": "2.0", "id": question_id, "method": method, "params": params})

    start_roots = []
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None and request_id == "start-roots":
            start_roots.append(json.dumps(message.get("result") or message.get("error"),
                                          sort_keys=True))
            continue
        if method == "notifications/initialized" and "--roots-at-start" in sys.argv:
            send({"jsonrpc": "2.0", "id": "start-roots", "method": "roots/list", "params": {}})
            continue
        if method == "tools/call" and message["params"]["name"] == "start_roots":
            text = "at start: " + (start_roots[0] if start_roots else "no answer yet")
            answer(request_id, {"content": [{"type": "text", "text": text}], "isError": False})
            continue
        if method is None:
            call = calls.pop(request_id, None)
            if call is None:
                continue
            error = message.get("error")
            if error:
                text = "refused: " + error.get("message", "")
                answer(call["id"], {"content": [{"type": "text", "text": text}], "isError": True})
                continue
            call["answers"].append(json.dumps(message.get("result"), sort_keys=True))
            if len(call["answers"]) < len(call["questions"]):
                ask(call)
                continue
            text = "answered " + " then ".join(call["answers"])
            answer(call["id"], {"content": [{"type": "text", "text": text}], "isError": False})
        elif method == "initialize":
            answer(request_id, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-asking", "version": "1"},
            })
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in QUESTIONS]
            if "--roots-at-start" in sys.argv:
                tools.append({"name": "start_roots", "inputSchema": {"type": "object"}})
            if "--task-only-tool" in sys.argv:
                tools.append({"name": "research", "inputSchema": {"type": "object"},
                              "execution": {"taskSupport": "required"}})
            answer(request_id, {"tools": tools})
        elif method == "tools/call":
            name = message["params"]["name"]
            ask({"id": request_id, "questions": QUESTIONS[name], "answers": []})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "Method not found"}})


main()
