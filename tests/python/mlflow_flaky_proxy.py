"""An HTTP proxy in front of an MLflow server that answers every third request with a 500.

    python mlflow_flaky_proxy.py LISTEN_PORT UPSTREAM_PORT COUNT_FILE

The other requests go to 127.0.0.1:UPSTREAM_PORT unchanged (method, path, headers, body). After
each request COUNT_FILE holds "<requests> <injected 500s>". tests/integration/mlflow_tests.cpp
trains through it and checks that MLflow still got every value.
"""

import http.client
import http.server
import sys
import threading

LISTEN_PORT, UPSTREAM_PORT, COUNT_FILE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
counts = {"requests": 0, "injected": 0}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "expect"}


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with lock:
            counts["requests"] += 1
            inject = counts["requests"] % 3 == 0
            if inject:
                counts["injected"] += 1
            with open(COUNT_FILE, "w") as f:
                f.write(f"{counts['requests']} {counts['injected']}\n")
        if inject:
            reply = b'{"error_code": "INTERNAL_ERROR", "message": "injected by mlflow_flaky_proxy.py"}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            return
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM_PORT, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream.request(self.command, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_GET = do_POST = do_PUT = relay


http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN_PORT), Proxy).serve_forever()
