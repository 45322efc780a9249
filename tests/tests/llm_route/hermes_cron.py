"""Drive Hermes Agent's own cron through fleetgate's LLM route, for the route's spend tests.

    hermes_cron.py setup HOME BASE_URL PROVIDER   write the home and one job (no script: every
                                                  tick wakes the agent)
    hermes_cron.py tick HOME                      make the job due and run one cron tick

The model is `gpt-4.1` at BASE_URL (the gate's `/llm/cron/v1`); the key in the environment
is a placeholder the gate replaces. `tick` prints one JSON line: the jobs the tick ran, and
the job's `last_status` / `last_error` as Hermes recorded them.
"""

import json
import os
import sys
from pathlib import Path

JOB_NAME = "spend-check"


def setup_env(home: Path) -> None:
    os.environ["HERMES_HOME"] = str(home)
    os.environ["HERMES_MANAGED_DIR"] = str(home / "no-managed")
    os.environ["HERMES_TIMEZONE"] = "UTC"


def setup(home: Path, base_url: str, provider: str) -> None:
    import yaml

    home.mkdir(parents=True, exist_ok=True)
    setup_env(home)
    config = {"model": {"provider": provider, "base_url": base_url, "default": "gpt-4.1"}}
    if provider == "custom":
        config["model"]["api_key"] = os.environ.get("OPENAI_API_KEY", "placeholder")
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    from cron.jobs import create_job

    job = create_job(
        "Check the build queue and say what you found.",
        "every 15m",
        name=JOB_NAME,
        deliver="local",
    )
    print(json.dumps({"job_id": job["id"]}))


def tick(home: Path) -> None:
    setup_env(home)
    from cron.jobs import get_job, list_jobs, trigger_job
    from cron.scheduler import tick as cron_tick

    trigger_job(JOB_NAME)
    ran = cron_tick(verbose=False)
    job = next((j for j in list_jobs(include_disabled=True) if j.get("name") == JOB_NAME), None)
    job = get_job(job["id"]) if job else {}
    print(json.dumps({"ran": ran, "last_status": job.get("last_status"),
                      "last_error": job.get("last_error")}))


if __name__ == "__main__":
    cmd, home = sys.argv[1], Path(sys.argv[2])
    if cmd == "setup":
        setup(home, sys.argv[3], sys.argv[4])
    else:
        tick(home)
