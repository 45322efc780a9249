"""Hermes Agent 0.20.1's cron monitor source, fetched for real, for fleetgate's forward-proxy tests.

Usage: python hermes_cron_monitor.py HOME URL...

For each URL, creates a monitor job with Hermes' own job store (`cron.jobs.create_job(...,
monitor_url=URL)`) and runs `cron.monitor.check_monitor(job)` twice: the step the scheduler
runs before any agent machinery, which fetches `monitor_url` with plain urllib, so through
HTTP(S)_PROXY from the environment (the test sets the gate's forward proxy, as the injected
sidecar does). Prints one JSON line per URL:
{"url", "ok", "changed", "first_run", "error", "context", "second": {"ok", "changed"}}.
"""
import json
import os
import sys
from pathlib import Path

home = Path(sys.argv[1])
home.mkdir(parents=True, exist_ok=True)
os.environ["HERMES_HOME"] = str(home)
os.environ["HERMES_MANAGED_DIR"] = str(home / "no-managed")

from cron.jobs import create_job, get_job  # noqa: E402
from cron.monitor import check_monitor  # noqa: E402

for i, url in enumerate(sys.argv[2:]):
    job = create_job(
        "Say what changed on the monitored page.",
        "every 15m",
        name=f"monitor-{i}",
        deliver="local",
        monitor_url=url,
    )
    first = check_monitor(get_job(job["id"]) or job)
    second = check_monitor(get_job(job["id"]) or job)
    print(json.dumps({
        "url": url,
        "ok": first.ok,
        "changed": first.changed,
        "first_run": first.first_run,
        "error": first.error,
        "context": first.context_block,
        "second": {"ok": second.ok, "changed": second.changed},
    }), flush=True)
