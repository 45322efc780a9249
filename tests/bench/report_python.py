#!/usr/bin/env python3
"""The cron cost computation of fleetgate's report, written plainly in Python with sqlite3.

    report_python.py <hermes_home> <now_unix> <days>

The side-by-side reference for report/benches/report.rs: same definitions (run, empty run,
lineage cost, covered span), same queries, plain Python loops. Prints one JSON object:
{"elapsed_s": wall seconds spent computing (interpreter start-up excluded), "cpu_s": the
CPU seconds of the same span, "jobs": {id: figures}}.
"""

import bisect
import json
import sqlite3
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

MAX_TERMINAL_EXECUTIONS = 1000
TERMINAL = ("completed", "failed", "unknown")
NOT_STARTED = (
    "Fire claim lost; execution was not started.",
    "Dispatch claim rejected; execution was not started.",
    "Executor dispatch failed: ",
    "Fire claim ownership could not be validated before execution started.",
    "Fire claim ownership lost before execution started.",
    "Fire claim heartbeat could not be started; execution was not run.",
    "Restart-safe cron worker dispatch failed: ",
)
MARKERS = {"[SILENT]", "SILENT", "NO_REPLY", "NO REPLY"}


def is_silence(text):
    stripped = text.strip()
    if not stripped:
        return False

    def token(line):
        return " ".join(line.strip().upper().split()) in MARKERS

    if token(stripped):
        return True
    lines = [line for line in stripped.splitlines() if line.strip()]
    if lines and (token(lines[0]) or token(lines[-1])):
        return True
    return stripped.upper().startswith("[SILENT]")


def parse_iso(text):
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def read_only(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def load_jobs(home):
    data = json.loads((home / "cron" / "jobs.json").read_text(encoding="utf-8-sig"))
    jobs = data.get("jobs", []) if isinstance(data, dict) else data
    return [job for job in jobs if isinstance(job, dict)]


def read_ledger(home, since):
    conn = read_only(home / "cron" / "executions.db")
    floor = datetime.fromtimestamp(since - 2 * 86400, timezone.utc).strftime("%Y-%m-%d")
    rows = conn.execute(
        "SELECT job_id, status, claimed_at, finished_at, error FROM executions WHERE claimed_at >= ?",
        (floor,),
    ).fetchall()
    count, oldest = conn.execute(
        "SELECT COUNT(*), MIN(claimed_at) FROM executions "
        "WHERE status IN ('completed','failed','unknown')"
    ).fetchone()
    executions = {}
    for job_id, status, claimed, finished, error in rows:
        not_started = status == "failed" and any((error or "").startswith(p) for p in NOT_STARTED)
        executions.setdefault(job_id, []).append(
            (parse_iso(claimed), parse_iso(finished) if finished else None, status, not_started)
        )
    for runs in executions.values():
        runs.sort(key=lambda e: e[0])
    coverage = None
    if oldest and count >= MAX_TERMINAL_EXECUTIONS and parse_iso(oldest) > since:
        coverage = parse_iso(oldest)
    return executions, coverage


def job_of(session_id):
    if not session_id.startswith("cron_"):
        return None
    rest = session_id[len("cron_"):]
    job_id, stamp = rest[:-16], rest[-16:]
    digits = stamp[1:9] + stamp[10:]
    if not job_id or len(stamp) != 16 or stamp[0] != "_" or stamp[9] != "_" or not digits.isdigit():
        return None
    return job_id


def read_turns(home, since, until):
    conn = read_only(home / "state.db")
    sessions = {}
    for sid, parent, source, started, end_reason, cost, tokens in conn.execute(
        "SELECT id, parent_session_id, source, started_at, end_reason, "
        "COALESCE(actual_cost_usd, estimated_cost_usd, 0), COALESCE(input_tokens, 0) + "
        "COALESCE(output_tokens, 0) + COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_tokens, 0) "
        "FROM sessions WHERE started_at >= ?",
        (since,),
    ):
        sessions[sid] = {"parent": parent, "subagent": source == "subagent", "started": started,
                         "compressed": end_reason == "compression", "cost": cost, "tokens": tokens}
    for sid, cost, tokens in conn.execute(
        "SELECT session_id, CASE WHEN actual_cost_usd > 0 THEN actual_cost_usd "
        "ELSE estimated_cost_usd END, input_tokens + output_tokens + cache_read_tokens + "
        "cache_write_tokens FROM session_model_usage WHERE task != ''"
    ):
        if sid in sessions:
            sessions[sid]["cost"] += cost or 0.0
            sessions[sid]["tokens"] += tokens or 0
    continuation = {}
    for sid, s in sessions.items():
        parent = s["parent"]
        if parent and not s["subagent"]:
            if parent not in continuation or sessions[continuation[parent]]["started"] <= s["started"]:
                continuation[parent] = sid
    totals = {}
    for sid, s in sessions.items():
        root, hops = sid, 0
        while root is not None and job_of(root) is None and hops < 64:
            root = sessions.get(root, {}).get("parent")
            root = root if root in sessions else None
            hops += 1
        if root is not None and job_of(root) is not None:
            cost, tokens = totals.get(root, (0.0, 0))
            totals[root] = (cost + s["cost"], tokens + int(s["tokens"]))
    last = ("SELECT role, content, tool_calls, active FROM messages WHERE rowid = "
            "(SELECT MAX(rowid) FROM messages WHERE session_id = ?)")
    last_active = ("SELECT role, content, tool_calls, active FROM messages WHERE rowid = "
                   "(SELECT MAX(rowid) FROM messages WHERE session_id = ? AND active = 1)")
    turns = {}
    for sid, s in sessions.items():
        job_id = job_of(sid)
        if job_id is None or s["started"] > until:
            continue
        tip = sid
        while sessions[tip]["compressed"] and tip in continuation:
            tip = continuation[tip]
        row = conn.execute(last, (tip,)).fetchone()
        if row is not None and row[3] == 0:
            row = conn.execute(last_active, (tip,)).fetchone()
        if row is None:
            reply = ""
        elif row[0] != "assistant" or (row[2] or "").strip() not in ("", "[]", "null"):
            reply = None  # the turn ended mid-way
        else:
            reply = row[1] or ""
        cost, tokens = totals.get(sid, (0.0, 0))
        turns.setdefault(job_id, []).append((s["started"], cost, tokens, reply))
    return turns


def tally(job, executions, turns, since, until, coverage):
    created = job.get("created_at")
    start = max([since] + ([parse_iso(created)] if created else []) + ([coverage] if coverage else []))
    execs = executions.get(job["id"], [])
    claims = [e[0] for e in execs]
    runs, run_of = [], {}
    for index, (claimed, _finished, status, not_started) in enumerate(execs):
        if status in TERMINAL and not not_started and start <= claimed <= until:
            run_of[index] = len(runs)
            runs.append({"failed": status != "completed", "turns": [], })
    for turn in turns.get(job["id"], []):
        index = bisect.bisect_right(claims, turn[0]) - 1
        finished = execs[index][1] if index >= 0 else None
        if index >= 0 and turn[0] <= (finished if finished is not None else float("inf")):
            if index in run_of:
                runs[run_of[index]]["turns"].append(turn)
        elif start <= turn[0] <= until:
            runs.append({"failed": False, "turns": [turn]})
    empty = 0
    for run in runs:
        if run["failed"]:
            continue
        latest = max(run["turns"], key=lambda t: t[0]) if run["turns"] else None
        if latest is None or latest[3] == "" or (latest[3] is not None and is_silence(latest[3])):
            empty += 1
    return {
        "runs": len(runs),
        "runs_failed": sum(1 for r in runs if r["failed"]),
        "agent_turns": sum(len(r["turns"]) for r in runs),
        "empty_runs": None if job.get("no_agent") else empty,
        "tokens": sum(t[2] for r in runs for t in r["turns"]),
        "cost_usd": round(sum(t[1] for r in runs for t in r["turns"]), 4),
    }


def main():
    home, now, days = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    started, cpu = time.perf_counter(), time.process_time()
    since = now - days * 86400
    jobs = load_jobs(home)
    executions, coverage = read_ledger(home, since)
    turns = read_turns(home, since, now)
    result = {job["id"]: tally(job, executions, turns, since, now, coverage) for job in jobs}
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    json.dump({"elapsed_s": elapsed, "cpu_s": cpu, "jobs": result}, sys.stdout)


if __name__ == "__main__":
    main()
