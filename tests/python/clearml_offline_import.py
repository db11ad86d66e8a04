"""Imports an offline ClearML session with ClearML's own Task.import_offline_session and prints
what reached the server as JSON.

    python clearml_offline_import.py <session folder or zip>

The import is ClearML's code from end to end: it unzips the session, reads task.json, creates
the task and edits it with the exported fields, uploads the artifacts and debug images, and sends
log.jsonl and metrics.jsonl as event batches. The server it talks to is a stand-in on 127.0.0.1
that answers each API call the import makes (auth.login, projects.*, tasks.*, events.add_batch,
file uploads) as a ClearML server does and records what it was sent; it judges nothing. Used by
tests/integration/clearml_tests.cpp.
"""

import base64
import email.parser
import hashlib
import json
import os
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def b64url(value):
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


# The client decodes (does not verify) its session token: a JWT with an expiry and an identity.
TOKEN = ".".join(
    [
        b64url({"alg": "HS256", "typ": "JWT"}),
        b64url({"exp": 4102444800, "identity": {"user": "u", "company": "c", "user_name": "oml", "role": "user"}}),
        b64url("signature"),
    ]
)


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []
        self.projects = {}
        self.tasks = {}
        self.events = []
        self.uploads = {}


def handler_for(state):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.answer()

        def do_POST(self):
            self.answer()

        def answer(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            endpoint = self.path.strip("/").split("/")[-1]
            with state.lock:
                data = self.serve(endpoint, body)
            reply = json.dumps(
                {
                    "meta": {
                        "id": uuid.uuid4().hex,
                        "trx": uuid.uuid4().hex,
                        "endpoint": {"name": endpoint, "requested_version": "2.9", "actual_version": "2.9"},
                        "result_code": 200,
                        "result_subcode": 0,
                        "result_msg": "OK",
                        "error_stack": "",
                    },
                    "data": data,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def serve(self, endpoint, body):
            content_type = self.headers.get("Content-Type") or ""
            if content_type.startswith("multipart/form-data"):
                # A file upload (StorageManager to the files server): one part per file.
                message = email.parser.BytesParser().parsebytes(
                    b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
                )
                for part in message.get_payload():
                    content = part.get_payload(decode=True)
                    name = part.get_param("name", header="content-disposition")
                    state.uploads[name.lstrip("/")] = {
                        "size": len(content),
                        "sha256": hashlib.sha256(content).hexdigest(),
                    }
                state.calls.append("upload")
                return {}
            state.calls.append(endpoint)
            if endpoint == "events.add_batch":
                state.events.extend(json.loads(line) for line in body.decode().splitlines() if line.strip())
                return {"added": len(state.events), "errors": 0}
            request = json.loads(body) if body else {}
            if endpoint == "auth.login":
                return {"token": TOKEN}
            if endpoint == "projects.get_all":
                wanted = str(request.get("name", "")).strip("^$")
                return {"projects": [p for p in state.projects.values() if not wanted or p["name"] == wanted]}
            if endpoint == "projects.create":
                project_id = uuid.uuid4().hex
                state.projects[project_id] = {"id": project_id, "name": request["name"]}
                return {"id": project_id}
            if endpoint == "tasks.create":
                task_id = uuid.uuid4().hex
                state.tasks[task_id] = dict(request, id=task_id, status="created")
                return {"id": task_id}
            if endpoint == "tasks.get_by_id":
                return {"task": state.tasks[request["task"]]}
            if endpoint in ("tasks.get_all", "tasks.get_all_ex"):
                ids = request.get("id") or list(state.tasks)
                return {"tasks": [state.tasks[i] for i in ids if i in state.tasks]}
            if endpoint == "tasks.edit":
                task = state.tasks[request["task"]]
                task.update({k: v for k, v in request.items() if k not in ("task", "force", "method")})
                return {"updated": 1, "fields": {}}
            statuses = {"tasks.started": "in_progress", "tasks.completed": "completed", "tasks.stopped": "stopped",
                        "tasks.failed": "failed", "tasks.close": "closed"}
            if endpoint in statuses:
                state.tasks[request["task"]]["status"] = statuses[endpoint]
                return {"updated": 1, "fields": {}}
            return {}

    return Handler


def main(session):
    state = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory(prefix="clearml-home-") as home:
        run(session, state, url, home)
    server.shutdown()


def run(session, state, url, home):
    os.environ.update(
        {
            "HOME": home,  # no clearml.conf of the user's, and its cache in a folder of its own
            "CLEARML_API_HOST": url,
            "CLEARML_WEB_HOST": url,
            "CLEARML_FILES_HOST": url,
            "CLEARML_API_ACCESS_KEY": "key",
            "CLEARML_API_SECRET_KEY": "secret",
        }
    )
    from clearml import Task  # reads the environment when imported

    stdout = sys.stdout
    sys.stdout = sys.stderr  # the import's progress lines
    try:
        task_id = Task.import_offline_session(session)
    finally:
        sys.stdout = stdout
    task = state.tasks.get(task_id, {})
    project = state.projects.get(task.get("project"), {})
    print(
        json.dumps(
            {
                "task_id": task_id,
                "project": project.get("name"),
                "task": task,
                "events": state.events,
                "uploads": state.uploads,
                "calls": state.calls,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
