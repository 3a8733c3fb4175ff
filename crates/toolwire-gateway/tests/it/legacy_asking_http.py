"""A 2025-11-25 MCP server over Streamable HTTP (sessions, SSE replies) whose tools ask the
client mid-call with a server->client request on the call's own response stream, as
legacy_asking.py does on stdio (same tools, same answers). It prints its URL on stdout once
it listens on a free loopback port. A request without a session other than `initialize`
gets 400, as a legacy server answers a 2026-07-28 request."""
import http.server
import json
import sys
import threading
import uuid

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
# Questions waiting for the client's answer, by id: [event, answer].
waiting = {}
lock = threading.Lock()
counter = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, message=None, session=None):
        body = json.dumps(message).encode() if message is not None else b""
        self.send_response(status)
        if message is not None:
            self.send_header("Content-Type", "application/json")
        if session:
            self.send_header("Mcp-Session-Id", session)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def event(self, message):
        data = ("data: " + json.dumps(message) + "\n\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        self.reply(405)

    def do_DELETE(self):
        self.reply(200)

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method, request_id = message.get("method"), message.get("id")
        if method is None:
            with lock:
                entry = waiting.pop(request_id, None)
            if entry:
                entry[1] = message
                entry[0].set()
            return self.reply(202)
        if method == "initialize":
            return self.reply(200, {"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-asking-http", "version": "1"},
            }}, session=uuid.uuid4().hex)
        if not self.headers.get("Mcp-Session-Id"):
            return self.reply(400, {"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32600, "message": "Bad Request: no session"}})
        if request_id is None:
            return self.reply(202)
        if method == "tools/list":
            return self.reply(200, {"jsonrpc": "2.0", "id": request_id, "result": {
                "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in QUESTIONS]}})
        if method != "tools/call":
            return self.reply(200, {"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32601, "message": "Method not found"}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        answers, text, failed = [], None, False
        for question, params in QUESTIONS[message["params"]["name"]]:
            with lock:
                counter[0] += 1
                question_id = "q-%d" % counter[0]
                entry = [threading.Event(), None]
                waiting[question_id] = entry
            self.event({"jsonrpc": "2.0", "id": question_id, "method": question,
                        "params": params})
            if not entry[0].wait(30):
                text, failed = "refused: no answer", True
                break
            error = entry[1].get("error")
            if error:
                text, failed = "refused: " + error.get("message", ""), True
                break
            answers.append(json.dumps(entry[1].get("result"), sort_keys=True))
        if text is None:
            text = "answered " + " then ".join(answers)
        self.event({"jsonrpc": "2.0", "id": request_id, "result": {
            "content": [{"type": "text", "text": text}], "isError": failed}})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("http://127.0.0.1:%d/mcp" % server.server_address[1], flush=True)
server.serve_forever()
