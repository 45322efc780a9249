// One server of the smuggling farm: Node.js's http (llhttp). `node nodefarm.js PORT LOG` serves
// 127.0.0.1:PORT and appends one JSON line per request it parsed completely (head and whole
// body) to LOG: {"method", "target", "host", "body_len"}.
"use strict";
const fs = require("fs");
const http = require("http");

const [port, logPath] = process.argv.slice(2);
const log = fs.openSync(logPath, "a");

http
  .createServer((req, res) => {
    let len = 0;
    req.on("data", (chunk) => (len += chunk.length));
    req.on("end", () => {
      const line = { method: req.method, target: req.url, host: req.headers.host || "", body_len: len };
      fs.writeSync(log, JSON.stringify(line) + "\n");
      res.writeHead(200, { "content-type": "text/plain", "content-length": "2" });
      res.end("ok");
    });
    req.on("error", () => {});
  })
  .listen(Number(port), "127.0.0.1");
