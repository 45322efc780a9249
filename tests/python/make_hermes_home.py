#!/usr/bin/env python3
"""Write a Hermes home with Hermes' own modules, for fleetgate's report tests.

    make_hermes_home.py <home_dir> <spec.json>

The spec (written by report/tests/report_hermes.rs) lists cron jobs and their runs on a fake
clock. Everything Hermes stores is written by the installed Hermes modules themselves:
jobs with cron.jobs (create_job, update_job, pause_job, mark_job_run), the execution ledger
with cron.executions (create_execution, mark_execution_running, finish_execution), sessions,
messages, token/cost counters and auxiliary usage with hermes_state.SessionDB. Only the
clock is replaced (Hermes' `now()` and `time.time()` as seen by those modules), so runs land
at the instants the spec names.

Spec keys:
  timezone              Hermes timezone (HERMES_TIMEZONE) for ISO timestamps and session ids
  config, managed       user config.yaml and managed config.yaml contents (managed may be null)
  observed              optional fleet-policy/observed.json content (the plugin's file)
  silence_probe         strings to classify with Hermes' cron silence function
  jobs[]                {key, created_at, create{...create_job kwargs}, update{...}, pause,
                         last_run: {success, error} | null,
                         runs[]: {claimed_at, duration, status: completed|failed|running,
                                  error, agent: null | {reply, tool_call_last, session cost
                                  and tokens, children[], aux[]}}}

Prints one JSON object on stdout: the ids Hermes gave each job key, what Hermes itself says
about the effective config, the pinned managed keys and the silence probe, and the cron
session ids created per job key.
"""

import json
import os
import sys
import time as _real_time
import types
import uuid
from datetime import datetime
from pathlib import Path

EFFECTIVE_KEYS = [
    "model.default", "model.provider", "agent.reasoning_effort", "agent.service_tier",
    "delegation.reasoning_effort", "delegation.model", "compression.threshold_tokens",
    "x_search.model",
]


class Clock:
    """The fake clock every patched Hermes module reads."""

    def __init__(self):
        self.now = _real_time.time()

    def time(self):
        return self.now


CLOCK = Clock()


def fake_time_module():
    shim = types.ModuleType("time")
    shim.__dict__.update(_real_time.__dict__)
    shim.time = CLOCK.time
    return shim


def setup_environment(home: Path, spec: dict) -> None:
    home.mkdir(parents=True, exist_ok=True)
    os.environ["HERMES_HOME"] = str(home)
    os.environ["HERMES_TIMEZONE"] = spec.get("timezone") or "UTC"
    managed_dir = home.parent / (home.name + "-managed")
    if spec.get("managed") is not None:
        managed_dir.mkdir(exist_ok=True)
        os.environ["HERMES_MANAGED_DIR"] = str(managed_dir)
    else:
        os.environ["HERMES_MANAGED_DIR"] = str(home / "no-such-managed-dir")


def write_configs(home: Path, spec: dict) -> None:
    import yaml

    if spec.get("config") is not None:
        (home / "config.yaml").write_text(yaml.safe_dump(spec["config"], sort_keys=False))
    if spec.get("managed") is not None:
        managed = Path(os.environ["HERMES_MANAGED_DIR"]) / "config.yaml"
        managed.write_text(yaml.safe_dump(spec["managed"], sort_keys=False))
    if spec.get("observed") is not None:
        (home / "fleet-policy").mkdir(exist_ok=True)
        (home / "fleet-policy" / "observed.json").write_text(json.dumps(spec["observed"]))


def patch_clock():
    import hermes_state
    import hermes_time
    import cron.executions as executions
    import cron.jobs as jobs

    def now():
        tz = hermes_time.get_timezone()
        return datetime.fromtimestamp(CLOCK.now, tz) if tz else datetime.fromtimestamp(CLOCK.now).astimezone()

    executions._hermes_now = now
    jobs._hermes_now = now
    hermes_state.time = fake_time_module()
    return now


def create_job(spec_job: dict) -> str:
    import cron.jobs as jobs

    CLOCK.now = spec_job["created_at"]
    job = jobs.create_job(**spec_job["create"])
    if spec_job.get("update"):
        jobs.update_job(job["id"], dict(spec_job["update"]))
    return job["id"]


def record_usage(db, session_id: str, usage: dict) -> None:
    db.update_token_counts(
        session_id,
        input_tokens=usage.get("input", 0),
        output_tokens=usage.get("output", 0),
        cache_read_tokens=usage.get("cache_read", 0),
        cache_write_tokens=usage.get("cache_write", 0),
        model="test-model",
        estimated_cost_usd=usage.get("estimated"),
        actual_cost_usd=usage.get("actual"),
        api_call_count=1,
    )


def run_agent(db, now, job_id: str, agent: dict) -> str:
    session_id = f"cron_{job_id}_{now().strftime('%Y%m%d_%H%M%S')}"
    db.create_session(session_id, "cron", model="test-model")
    CLOCK.now += 1
    db.append_message(session_id, "user", "[IMPORTANT: You are running as a scheduled cron job.]")
    record_usage(db, session_id, agent)
    for child in agent.get("children", []):
        CLOCK.now += 1
        child_id = f"delegate_{uuid.uuid4().hex[:16]}"
        db.create_session(child_id, "subagent", model="test-model",
                          parent_session_id=session_id,
                          model_config={"_delegate_from": session_id})
        record_usage(db, child_id, child)
        for aux in child.get("aux", []):
            record_aux(db, child_id, aux)
    for aux in agent.get("aux", []):
        record_aux(db, session_id, aux)
    CLOCK.now += 1
    if agent.get("tool_call_last"):
        db.append_message(session_id, "assistant", agent.get("reply", ""),
                          tool_calls=[{"id": "call_1", "type": "function",
                                       "function": {"name": "web_search", "arguments": "{}"}}])
    else:
        db.append_message(session_id, "assistant", agent.get("reply", ""))
    db.end_session(session_id, "cron_complete")
    return session_id


def record_aux(db, session_id: str, aux: dict) -> None:
    db.record_auxiliary_usage(
        session_id, aux["task"], model="aux-model",
        input_tokens=aux.get("input", 0), output_tokens=aux.get("output", 0),
        cache_read_tokens=aux.get("cache_read", 0), cache_write_tokens=aux.get("cache_write", 0),
        estimated_cost_usd=aux.get("estimated"),
    )


def replay_runs(db, now, job_id: str, spec_job: dict) -> list:
    import cron.executions as executions
    import cron.jobs as jobs

    sessions = []
    for run in sorted(spec_job.get("runs", []), key=lambda r: r["claimed_at"]):
        CLOCK.now = run["claimed_at"]
        row = executions.create_execution(job_id, source="builtin")
        if (run.get("error") or "").startswith("Fire claim lost"):
            executions.finish_execution(row["id"], success=False, error=run["error"])
            continue
        executions.mark_execution_running(row["id"])
        if run.get("agent") is not None:
            CLOCK.now += 1
            sessions.append(run_agent(db, now, job_id, run["agent"]))
        if run["status"] == "running":
            continue
        CLOCK.now = run["claimed_at"] + run.get("duration", 30)
        success = run["status"] == "completed"
        executions.finish_execution(row["id"], success=success, error=run.get("error"))
        jobs.mark_job_run(job_id, success, error=None if success else run.get("error"))
    if spec_job.get("pause"):
        jobs.pause_job(job_id, reason="paused by the fixture")
    return sessions


def oracle(spec: dict) -> dict:
    from cron.scheduler import _get_script_timeout, _is_cron_silence_response
    from hermes_cli import managed_scope
    from hermes_cli.config import load_config

    config = load_config()

    def lookup(dotted):
        node = config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    effective = {key: lookup(key) for key in EFFECTIVE_KEYS}
    if isinstance(config.get("model"), str):
        effective["model.default"] = config["model"] or None
    # The cron settings as the scheduler reads them. 0.19.0 has no drift guard and no
    # preflight: those keys are left out for it.
    try:
        from hermes_cli.config import cron_model_drift_guard_enabled
        effective["cron.model_drift_guard"] = cron_model_drift_guard_enabled(config)
    except ImportError:
        pass
    try:
        from cron.scheduler import _cron_preflight_enabled
        effective["cron.preflight"] = _cron_preflight_enabled(config)
    except ImportError:
        pass
    os.environ.pop("HERMES_CRON_SCRIPT_TIMEOUT", None)
    effective["cron.script_timeout_seconds"] = _get_script_timeout()
    return {
        "effective": effective,
        "managed_keys": len(managed_scope.managed_config_keys()),
        "silence": [_is_cron_silence_response(text) for text in spec.get("silence_probe", [])],
    }


def main() -> int:
    home, spec_path = Path(sys.argv[1]), Path(sys.argv[2])
    spec = json.loads(spec_path.read_text())
    setup_environment(home, spec)
    write_configs(home, spec)
    now = patch_clock()
    from hermes_state import SessionDB

    db = SessionDB(db_path=home / "state.db")
    ids, sessions = {}, {}
    for spec_job in sorted(spec["jobs"], key=lambda j: j["created_at"]):
        ids[spec_job["key"]] = create_job(spec_job)
    for spec_job in spec["jobs"]:
        sessions[spec_job["key"]] = replay_runs(db, now, ids[spec_job["key"]], spec_job)
    db.close()
    result = {"ids": ids, "sessions": sessions}
    result.update(oracle(spec))
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
