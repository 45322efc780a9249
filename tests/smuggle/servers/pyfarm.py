"""One server of the smuggling farm: `pyfarm.py KIND PORT LOG`.

Serves HTTP/1.1 on 127.0.0.1:PORT with the named Python server and appends one JSON line per
request it parsed *completely* (head and whole body) to LOG:
{"method", "target", "host", "body_len"}. The harness replays what the gate forwarded and
compares these lines with the gate's decisions. A request whose body cannot be read to its end
is not logged: the server never ran it.

KIND: gunicorn, waitress, cheroot, uvicorn-h11, uvicorn-httptools, hypercorn, aiohttp,
tornado, twisted.
"""

import json
import os
import sys

KIND, PORT, LOG = sys.argv[1], int(sys.argv[2]), sys.argv[3]
_log = open(LOG, "a", buffering=1)


def record(method, target, host, body_len):
    if isinstance(method, bytes):
        method = method.decode("latin-1")
    if isinstance(target, bytes):
        target = target.decode("latin-1")
    if isinstance(host, bytes):
        host = host.decode("latin-1")
    _log.write(json.dumps({"method": method, "target": target, "host": host or "", "body_len": body_len}) + "\n")


# --- WSGI (gunicorn, waitress, cheroot) -------------------------------------------------------

def wsgi_app(environ, start_response):
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH") or ""
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    if length.isdigit() and not chunked:
        body = stream.read(int(length))
        complete = len(body) == int(length)
    else:
        body = stream.read()
        complete = True
    if complete:
        target = environ.get("RAW_URI") or environ.get("REQUEST_URI")
        if not target:
            target = environ.get("PATH_INFO", "")
            if environ.get("QUERY_STRING"):
                target += "?" + environ["QUERY_STRING"]
        record(environ["REQUEST_METHOD"], target, environ.get("HTTP_HOST", ""), len(body))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


# --- ASGI (uvicorn, hypercorn) ----------------------------------------------------------------

async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    host = dict(scope["headers"]).get(b"host", b"")
    target = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    record(scope["method"], target, host, len(body))
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def main():
    if KIND == "gunicorn":
        from gunicorn.app.base import BaseApplication

        class App(BaseApplication):
            def load_config(self):
                self.cfg.set("bind", f"127.0.0.1:{PORT}")
                self.cfg.set("workers", 1)
                # The sync worker closes after every request; gthread keeps connections.
                self.cfg.set("worker_class", "gthread")
                self.cfg.set("threads", 2)
                self.cfg.set("accesslog", None)
                self.cfg.set("loglevel", "critical")

            def load(self):
                return wsgi_app

        App().run()
    elif KIND == "waitress":
        import waitress
        waitress.serve(wsgi_app, host="127.0.0.1", port=PORT, _quiet=True, threads=4)
    elif KIND == "cheroot":
        from cheroot import wsgi
        wsgi.Server(("127.0.0.1", PORT), wsgi_app).safe_start()
    elif KIND in ("uvicorn-h11", "uvicorn-httptools"):
        import uvicorn
        uvicorn.run(asgi_app, host="127.0.0.1", port=PORT, http=KIND.split("-")[1],
                    log_level="critical", lifespan="off", access_log=False)
    elif KIND == "hypercorn":
        import asyncio
        from hypercorn.asyncio import serve
        from hypercorn.config import Config
        config = Config()
        config.bind = [f"127.0.0.1:{PORT}"]
        config.loglevel = "CRITICAL"
        asyncio.run(serve(asgi_app, config))
    elif KIND == "aiohttp":
        from aiohttp import web

        async def handle(request):
            body = await request.read()
            record(request.method, request.raw_path, request.headers.get("Host", ""), len(body))
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        web.run_app(app, host="127.0.0.1", port=PORT, print=None, access_log=None)
    elif KIND == "tornado":
        import asyncio
        import tornado.web

        class Handler(tornado.web.RequestHandler):
            SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")

            def _any(self, *args):
                r = self.request
                record(r.method, r.uri, r.headers.get("Host", ""), len(r.body))
                self.write("ok")

            get = post = put = delete = patch = options = head = _any

        async def run():
            tornado.web.Application([(r"/.*", Handler)]).listen(PORT, address="127.0.0.1")
            await asyncio.Event().wait()

        asyncio.run(run())
    elif KIND == "twisted":
        from twisted.internet import reactor
        from twisted.web import resource, server

        class Root(resource.Resource):
            isLeaf = True

            def render(self, request):
                body = request.content.read()
                record(request.method, request.uri, request.getHeader(b"host") or b"", len(body))
                request.setHeader(b"content-type", b"text/plain")
                return b"ok"

        reactor.listenTCP(PORT, server.Site(Root()), interface="127.0.0.1")
        reactor.run()
    else:
        sys.exit(f"unknown server kind {KIND}")


if __name__ == "__main__":
    main()
