#!/usr/bin/env python3
"""Write a busy Hermes home the way Hermes leaves it, for the report benchmark.

    make_report_home.py <home_dir> <sessions> <now_unix> [prompt_bytes]

Runs inside the test venv (Hermes installed). The stores are created by Hermes' own modules:
state.db by `hermes_state.SessionDB` (its schema, indexes, FTS tables and triggers), the
ledger by `cron.executions` (its schema, and its own prune to the newest 1,000 terminal rows),
jobs.json by `cron.jobs.save_jobs`. The week of history is then written in bulk into those
schemas, in the columns Hermes' writers fill (`create_session` with the system prompt,
`append_message`, `update_token_counts`, `record_auxiliary_usage`, `end_session`,
`create_execution` / `finish_execution`), because a million sessions through the per-call API
would take hours:

- about `sessions` sessions over the seven days before `now_unix`: cron roots with ids
  `cron_<job>_<YYYYmmdd_HHMMSS>` in the Hermes timezone (+02:00 here), a sub-agent child for
  one root in ten, and chat sessions of other platforms;
- each session stores a system prompt of `prompt_bytes` (default 6,000) bytes, as the agent
  does at session start;
- one ledger row per fire (gated and script-only jobs fire without a session), of which
  Hermes' prune keeps the newest 1,000 terminal rows, plus the fires still running.

Prints one JSON object: {"sessions", "roots", "fires", "ledger_rows"}.
"""

import json
import os
import random
import sqlite3
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

TZ = timezone(timedelta(hours=2))
JOBS = 100
WEEK = 7 * 86400
# Fires beyond what the pruned ledger keeps are not written to it: Hermes would delete them.
LEDGER_TAIL = 3000


def main():
    home, target, now = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    prompt_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 6000
    home.mkdir(parents=True, exist_ok=True)
    os.environ["HERMES_HOME"] = str(home)
    os.environ["HERMES_TIMEZONE"] = "Europe/Berlin"
    from cron import executions, jobs as cron_jobs  # noqa: E402  (reads HERMES_HOME)
    from hermes_state import SessionDB  # noqa: E402

    rng = random.Random(34)
    job_list = make_jobs(rng, now)
    cron_jobs.save_jobs(job_list)
    SessionDB(home / "state.db").close()
    ledger = executions._connect()  # Hermes' schema and pragmas
    state = sqlite3.connect(home / "state.db", isolation_level=None)
    # The bulk write goes straight to the file; the database is left in WAL mode as Hermes
    # leaves it.
    state.execute("PRAGMA journal_mode=DELETE")
    state.execute("PRAGMA synchronous=OFF")
    state.execute("BEGIN")
    fires = plan_fires(job_list, target, now)
    counts = write_history(state, fires, prompt_bytes, now, rng)
    state.execute("COMMIT")
    state.execute("PRAGMA journal_mode=WAL")
    state.close()
    write_ledger(ledger, fires[-LEDGER_TAIL:], now)
    executions._prune_unlocked(ledger)  # Hermes keeps its newest 1,000 terminal rows
    ledger.commit()
    kept = ledger.execute("SELECT COUNT(*) FROM executions").fetchone()[0]
    ledger.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ledger.close()
    print(json.dumps({**counts, "fires": len(fires), "ledger_rows": kept}))


def make_jobs(rng, now):
    created = datetime.fromtimestamp(now - 30 * 86400, TZ).isoformat()
    out = []
    for j in range(JOBS):
        kind = "no_agent" if j % 10 == 0 else "gated" if j % 10 in (1, 2) else "agent"
        job = {
            "id": uuid.UUID(int=rng.getrandbits(128)).hex[:12],
            "name": f"{kind} job {j}",
            "prompt": "" if kind == "no_agent" else f"Check source {j} and report changes.",
            "skills": [],
            "skill": None,
            "model": None,
            "provider": None,
            "base_url": None,
            "script": {"no_agent": "watch.sh", "gated": "gate.py"}.get(kind),
            "no_agent": kind == "no_agent",
            "schedule": {"kind": "interval", "minutes": 5, "display": "every 5m"},
            "schedule_display": "every 5m",
            "repeat": {"times": None, "completed": 0},
            "enabled": True,
            "state": "scheduled",
            "created_at": created,
            "deliver": "local",
        }
        out.append(job)
    return out


def plan_fires(job_list, target, now):
    """Fires in time order: (instant, job, runs the agent)."""
    # Per fire: 0.75 roots (7 agent jobs in 10 always, 2 gated ones a quarter of the time),
    # a child for one root in ten, a chat session every 20 fires.
    count = int(target / (0.75 * 1.1 + 0.05))
    start = now - WEEK + 60
    step = (WEEK - 120) / count
    fires = []
    for n in range(count):
        job = job_list[n % JOBS]
        kind_gated = job["script"] == "gate.py"
        agent = not job["no_agent"] and (not kind_gated or (n // JOBS) % 4 == 0)
        fires.append((start + n * step, job, agent))
    return fires


def prompt_text(prompt_bytes, n):
    line = f"You are Hermes, run {n}. Follow the cron job instructions; use tools when needed.\n"
    return (line * (prompt_bytes // len(line) + 1))[:prompt_bytes]


def write_history(state, fires, prompt_bytes, now, rng):
    sessions, roots, n = [], 0, 0
    msgs, usage = [], []
    model_config = json.dumps({"max_iterations": 90, "reasoning_config": {"effort": "medium"}})
    for at, job, agent in fires:
        n += 1
        if n % 20 == 0:
            # A chat session of another platform: a fleet home is not only cron.
            sid = f"{datetime.fromtimestamp(at, TZ).strftime('%Y%m%d_%H%M%S')}_{n:08x}"
            sessions.append(session_row(sid, "telegram", None, at + 5, prompt_bytes, n, model_config))
        if not agent:
            continue
        roots += 1
        started = at + 1.2
        sid = f"cron_{job['id']}_{datetime.fromtimestamp(started, TZ).strftime('%Y%m%d_%H%M%S')}"
        sessions.append(session_row(sid, "cron", None, started, prompt_bytes, n, model_config))
        reply = "[SILENT]" if n % 2 == 0 else "Two new items need your attention."
        msgs.append((sid, "user", job["prompt"], started + 0.5))
        msgs.append((sid, "assistant", reply, started + 8.0))
        usage.append((sid, "", 1500, 120, 0.003, started, started + 8.0))
        if n % 5 == 2:
            usage.append((sid, "title_generation", 50, 10, 0.0002, started + 7.0, started + 7.0))
        if roots % 10 == 1:
            child = f"{datetime.fromtimestamp(started, TZ).strftime('%Y%m%d_%H%M%S')}_{rng.getrandbits(24):06x}"
            sessions.append(session_row(child, "subagent", sid, started + 2, prompt_bytes, n, model_config))
        if len(sessions) >= 2000:
            flush(state, sessions, msgs, usage)
    flush(state, sessions, msgs, usage)
    total = state.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    return {"sessions": total, "roots": roots}


def session_row(sid, source, parent, started, prompt_bytes, n, model_config):
    actual = 0.002 if n % 3 == 0 else None
    return (sid, source, "anthropic/claude-sonnet-4", model_config, prompt_text(prompt_bytes, n),
            parent, started, started + 9.0, "cron_complete" if source == "cron" else None,
            2, 1500, 120, 300, 0.003, actual, "anthropic", "estimated")


def flush(state, sessions, msgs, usage):
    state.executemany(
        "INSERT INTO sessions (id, source, model, model_config, system_prompt, parent_session_id,"
        " started_at, ended_at, end_reason, message_count, input_tokens, output_tokens,"
        " cache_read_tokens, estimated_cost_usd, actual_cost_usd, billing_provider, cost_status)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        sessions,
    )
    state.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)", msgs
    )
    state.executemany(
        "INSERT INTO session_model_usage (session_id, model, task, input_tokens, output_tokens,"
        " estimated_cost_usd, first_seen, last_seen) VALUES (?, 'anthropic/claude-sonnet-4', ?,"
        " ?, ?, ?, ?, ?)",
        usage,
    )
    sessions.clear()
    msgs.clear()
    usage.clear()


def write_ledger(ledger, fires, now):
    rows = []
    for index, (at, job, _agent) in enumerate(fires):
        claimed = datetime.fromtimestamp(at, TZ).isoformat()
        running = at > now - 30
        finished = None if running else datetime.fromtimestamp(at + 20, TZ).isoformat()
        status = "running" if running else "failed" if index % 50 == 7 else "completed"
        error = "RuntimeError: boom" if status == "failed" else None
        rows.append((uuid.uuid4().hex, job["id"], "builtin", uuid.uuid4().hex, 4242, status,
                     claimed, claimed, finished, error))
    ledger.executemany(
        "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at,"
        " started_at, finished_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


if __name__ == "__main__":
    main()
