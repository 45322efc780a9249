"""Drive Hermes Agent's own cron with a watch script, for fleetgate's watch tests.

    hermes_cron.py setup HOME WATCH_URL   write the home, the one-line curl script and the job
    hermes_cron.py tick HOME              make the job due, run one cron tick with a stub LLM

The stub LLM is an OpenAI-compatible endpoint on 127.0.0.1 started inside `tick`; every
request it receives is appended to HOME/../llm_requests.jsonl. `tick` prints one JSON line:
{"ran": <jobs run by the tick>, "llm_requests": <requests during this tick>}.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

JOB_NAME = "inbox-watch"


def setup_env(home: Path) -> None:
    os.environ["HERMES_HOME"] = str(home)
    os.environ["HERMES_MANAGED_DIR"] = str(home / "no-managed")
    os.environ["HERMES_TIMEZONE"] = "UTC"


def write_config(home: Path, llm_url: str) -> None:
    import yaml

    config = {
        "model": {"provider": "custom", "base_url": llm_url, "default": "stub-model", "api_key": "stub-key"},
        "cron": {"script_timeout_seconds": 60},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def setup(home: Path, watch_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    setup_env(home)
    write_config(home, "http://127.0.0.1:9/v1")
    scripts = home / "scripts"
    scripts.mkdir(exist_ok=True)
    (scripts / "watch-inbox.sh").write_text(f"curl -sf {watch_url}\n", encoding="utf-8")
    from cron.jobs import create_job

    job = create_job(
        "You receive new emails, one per line. If none needs the user, reply exactly [SILENT].",
        "every 15m",
        name=JOB_NAME,
        script="watch-inbox.sh",
        deliver="local",
    )
    print(json.dumps({"job_id": job["id"]}))


class StubLlm(BaseHTTPRequestHandler):
    log_path: Path = Path("/dev/null")
    count = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.reply({"object": "list", "data": [{"id": "stub-model", "object": "model"}]})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        StubLlm.count += 1
        with open(StubLlm.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"path": self.path, "body": body.decode("utf-8", "replace")}) + "\n")
        try:
            stream = json.loads(body or b"{}").get("stream")
        except ValueError:
            stream = False
        if stream:
            self.stream_reply()
        else:
            message = {"role": "assistant", "content": "[SILENT]"}
            self.reply({"id": "c1", "object": "chat.completion", "created": int(time.time()),
                        "model": "stub-model", "choices": [{"index": 0, "message": message,
                        "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def reply(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream_reply(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        base = {"id": "c1", "object": "chat.completion.chunk", "created": int(time.time()), "model": "stub-model"}
        chunks = [
            {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "[SILENT]"}, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
        ]
        for c in chunks:
            self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def tick(home: Path) -> None:
    setup_env(home)
    StubLlm.log_path = home.parent / "llm_requests.jsonl"
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubLlm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    write_config(home, f"http://127.0.0.1:{server.server_address[1]}/v1")
    from cron.jobs import trigger_job
    from cron.scheduler import tick as cron_tick

    trigger_job(JOB_NAME)
    ran = cron_tick(verbose=False)
    server.shutdown()
    print(json.dumps({"ran": ran, "llm_requests": StubLlm.count}))


if __name__ == "__main__":
    cmd, home = sys.argv[1], Path(sys.argv[2])
    if cmd == "setup":
        setup(home, sys.argv[3])
    else:
        tick(home)
