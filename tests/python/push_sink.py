"""A receiver for the push tests and benchmark: answers every POST with
204 and appends one JSON line per request to LOG (path, the headers that
matter, body length, and the body itself in hex when --keep-bodies).

usage: push_sink.py PORT_FILE LOG [--tls CERT KEY] [--keep-bodies]

Listens on a free loopback port and writes it to PORT_FILE once listening.
"""

import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, log_path = sys.argv[1], sys.argv[2]
tls = sys.argv[sys.argv.index("--tls") + 1 : sys.argv.index("--tls") + 3] if "--tls" in sys.argv else None
keep = "--keep-bodies" in sys.argv
HEADERS = ("authorization", "content-type", "content-encoding", "x-prometheus-remote-write-version",
           "x-scope-orgid", "user-agent")


class Sink(BaseHTTPRequestHandler):
    # Connections kept alive between pushes, as every real receiver keeps
    # them (the default, HTTP/1.0, closes each one after its answer).
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        record = {
            "path": self.path,
            "headers": {h: self.headers.get(h) for h in HEADERS if self.headers.get(h) is not None},
            "bytes": len(body),
        }
        if keep:
            record["body"] = body.hex()
        with open(log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
if tls:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls[0], tls[1])
    server.socket = context.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os

os.replace(port_file + ".tmp", port_file)
server.serve_forever()
