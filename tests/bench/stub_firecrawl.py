"""A stub Firecrawl `/v2/scrape` answering with the markdown of FILE, counting calls.

Usage: python3 stub_firecrawl.py PORT FILE
"""
import http.server
import json
import socketserver
import sys

port, path = int(sys.argv[1]), sys.argv[2]
markdown = open(path, encoding="utf-8").read()
body = json.dumps({"success": True, "data": {"markdown": markdown,
                   "metadata": {"title": "Bench page", "statusCode": 200}}}).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


print("ready", flush=True)
Server(("127.0.0.1", port), Handler).serve_forever()
