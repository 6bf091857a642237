#!/usr/bin/env python3
"""A scripted stand-in for a model, for the tour and the book's examples.

It speaks OpenAI's Chat Completions wire format (JSON, or server-sent
events when the request streams) on 127.0.0.1, needs no key and no network,
and knows one thing: asked for arithmetic ("What is 17 * 23?") with a
`calculate` tool offered, it calls the tool with the expression; given the
tool's result, it answers with it. `make test` runs the book's `run`
examples against it.

    python3 tests/scripted-model/scripted_model.py [--port 11435]
"""

import argparse
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE = {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}
EXPRESSION = re.compile(r"[0-9][0-9\s.+\-*/^()]*[0-9)]")
HELP = 'I am a scripted stand-in model: ask me for arithmetic, such as "What is 17 * 23?".'


def reply(request):
    """The assistant's message for a request: a tool call or text."""
    messages = request.get("messages", [])
    results = [m for m in messages if m.get("role") == "tool"]
    asked = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    found = EXPRESSION.search(str(asked.get("content", "")))
    expression = found.group(0).strip() if found else None
    if results and expression:
        return {"content": f"{expression} = {str(results[-1].get('content', '')).strip()}."}
    tools = [t.get("function", {}).get("name") for t in request.get("tools", [])]
    if expression and "calculate" in tools:
        arguments = json.dumps({"expression": expression}, separators=(",", ":"))
        call = {"id": "call_1", "type": "function",
                "function": {"name": "calculate", "arguments": arguments}}
        return {"tool_calls": [call]}
    return {"content": HELP}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if not self.path.endswith("/chat/completions"):
            self.send_error(404, "only /v1/chat/completions is scripted")
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.send_error(400, "the request is not JSON")
            return
        message = reply(request)
        finish = "tool_calls" if "tool_calls" in message else "stop"
        if request.get("stream"):
            self.stream(message, finish)
        else:
            body = {"id": "chatcmpl-scripted", "object": "chat.completion", "model": "scripted",
                    "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                 "finish_reason": finish}],
                    "usage": USAGE}
            self.send(200, "application/json", json.dumps(body).encode())

    def stream(self, message, finish):
        delta = dict(message)
        if "tool_calls" in delta:
            delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(delta["tool_calls"])]
        chunks = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {"choices": [], "usage": USAGE},
        ]
        events = "".join(f"data: {json.dumps(dict(c, id='chatcmpl-scripted', object='chat.completion.chunk', model='scripted'))}\n\n" for c in chunks)
        self.send(200, "text/event-stream", (events + "data: [DONE]\n\n").encode())

    def send(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=11435)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"scripted model at http://127.0.0.1:{port}/v1 (Ctrl-C ends it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
