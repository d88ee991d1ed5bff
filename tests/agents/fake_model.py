#!/usr/bin/env python3
"""A scripted model server on 127.0.0.1 for the agents' end-to-end tests.

Usage: fake_model.py SCRIPT.json LOG.jsonl

SCRIPT is {"prompts": [{"match": TEXT, "steps": [STEP, ...]}, ...]}. A
request belongs to the last prompt whose `match` text occurs in one of its
user messages; the number of tool results after that message picks the
step; past the last step the model answers "Done.". A STEP is
{"name": TOOL, "input": {...}} (a function call), or for a free-form tool
(Codex's apply_patch) {"name": TOOL, "custom": TEXT}. A request that offers
none of the step's tool (a title, a summary) gets a short text answer.

Wire APIs, each streamed the way its agent asks:
- POST /v1/messages (Anthropic Messages: Claude Code)
- POST /v1/responses (OpenAI Responses: Codex)
- POST /v1/chat/completions (OpenAI Chat Completions: opencode, Copilot, Cline)

Prints the port on stdout once listening; logs each request to LOG.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = json.load(open(sys.argv[1]))
LOG = open(sys.argv[2], "a", buffering=1)
LOCK = threading.Lock()
COUNTER = [0]


def next_id():
    """A fresh number for message and call ids (agents merge equal ids)."""
    with LOCK:
        COUNTER[0] += 1
        return COUNTER[0]


def texts(content):
    """The text of a message's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return [content]
    out = []
    for block in content or []:
        if isinstance(block, dict):
            for key in ("text", "input_text", "content"):
                if isinstance(block.get(key), str):
                    out.append(block[key])
    return out


def is_tool_result(item):
    t = item.get("type") if isinstance(item, dict) else None
    return t in ("tool_result", "function_call_output", "custom_tool_call_output")


def plan(messages):
    """(steps, index) for a conversation: a list of (role, content, tool
    results) in order."""
    found = None
    for i, (role, content, _) in enumerate(messages):
        if role != "user":
            continue
        for p in SCRIPT["prompts"]:
            if any(p["match"] in t for t in texts(content)):
                found = (p["steps"], i)
    if found is None:
        return None, 0
    steps, at = found
    results = sum(n for (_, _, n) in messages[at + 1 :])
    return steps, results


def step_for(messages, tool_names):
    steps, index = plan(messages)
    if steps is None or index >= len(steps):
        return None
    step = steps[index]
    if step["name"] not in tool_names:
        return None
    return step


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("content-length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def send(self, status, ctype, payload):
        data = payload.encode() if isinstance(payload, str) else payload
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse(self, events):
        self.send(200, "text/event-stream", "".join(events))

    def do_GET(self):
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            self.send(200, "application/json", json.dumps({"object": "list", "data": []}))
        else:
            self.send(404, "application/json", "{}")

    def do_HEAD(self):
        self.send(200, "text/plain", "")

    def do_POST(self):
        path = self.path.split("?")[0]
        req = self.body()
        with LOCK:
            LOG.write(json.dumps({"path": path, "request": req}) + "\n")
        if path.endswith("/messages"):
            self.anthropic(req)
        elif path.endswith("/responses"):
            self.openai_responses(req)
        elif path.endswith("/chat/completions"):
            self.chat(req)
        else:
            self.send(404, "application/json", "{}")

    # Anthropic Messages
    def anthropic(self, req):
        messages = []
        for m in req.get("messages", []):
            c = m.get("content")
            n = sum(1 for b in c if is_tool_result(b)) if isinstance(c, list) else 0
            messages.append((m.get("role"), c, n))
        tools = {t.get("name") for t in req.get("tools", [])}
        step = step_for(messages, tools)
        n = next_id()
        if step:
            block = {"type": "tool_use", "id": f"toolu_{n:08d}", "name": step["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(step["input"])}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": "Done."}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 10}
        if not req.get("stream"):
            content = dict(block)
            if step:
                content["input"] = step["input"]
            else:
                content["text"] = "Done."
            msg = {"id": f"msg_{n:08d}", "type": "message", "role": "assistant", "model": req.get("model"),
                   "content": [content], "stop_reason": stop, "stop_sequence": None, "usage": usage}
            self.send(200, "application/json", json.dumps(msg))
            return

        def ev(name, data):
            return f"event: {name}\ndata: {json.dumps(data)}\n\n"

        self.sse([
            ev("message_start", {"type": "message_start", "message": {
                "id": f"msg_{n:08d}", "type": "message", "role": "assistant", "model": req.get("model"),
                "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
            ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 10}}),
            ev("message_stop", {"type": "message_stop"}),
        ])

    # OpenAI Responses
    def openai_responses(self, req):
        items = req.get("input", [])
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        messages = []
        for it in items:
            if is_tool_result(it):
                messages.append(("tool", None, 1))
            else:
                messages.append((it.get("role"), it.get("content"), 0))
        tools = {t.get("name") for t in req.get("tools", []) if isinstance(t, dict)}
        step = step_for(messages, tools)
        n = next_id()
        rid = f"resp_{n}"
        if step and "custom" in step:
            item = {"type": "custom_tool_call", "id": f"ctc_{n}", "call_id": f"call_{n}",
                    "name": step["name"], "input": step["custom"], "status": "completed"}
        elif step:
            item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                    "name": step["name"], "arguments": json.dumps(step["input"]), "status": "completed"}
        else:
            item = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
        resp = {"id": rid, "object": "response", "status": "completed", "model": req.get("model"),
                "output": [item], "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
                                            "input_tokens_details": {"cached_tokens": 0},
                                            "output_tokens_details": {"reasoning_tokens": 0}}}

        def ev(data):
            return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

        created = dict(resp, status="in_progress", output=[])
        self.sse([
            ev({"type": "response.created", "response": created}),
            ev({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ev({"type": "response.output_item.done", "output_index": 0, "item": item}),
            ev({"type": "response.completed", "response": resp}),
        ])

    # OpenAI Chat Completions
    def chat(self, req):
        messages = []
        for m in req.get("messages", []):
            n = 1 if m.get("role") == "tool" else 0
            messages.append((m.get("role"), m.get("content"), n))
        tools = {t.get("function", {}).get("name") for t in req.get("tools", [])}
        step = step_for(messages, tools)
        n = next_id()
        cid = f"chatcmpl-{n}"
        if step:
            delta = {"role": "assistant", "content": None, "tool_calls": [{
                "index": 0, "id": f"call_{n}", "type": "function",
                "function": {"name": step["name"], "arguments": json.dumps(step["input"])}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": "Done."}
            finish = "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        if not req.get("stream"):
            msg = dict(delta)
            self.send(200, "application/json", json.dumps({
                "id": cid, "object": "chat.completion", "created": 0, "model": req.get("model"),
                "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}))
            return

        def chunk(d, f):
            return "data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": 0,
                                          "model": req.get("model"),
                                          "choices": [{"index": 0, "delta": d, "finish_reason": f}]}) + "\n\n"

        last = "data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": 0,
                                      "model": req.get("model"), "choices": [], "usage": usage}) + "\n\n"
        self.sse([chunk(delta, None), chunk({}, finish), last, "data: [DONE]\n\n"])


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
