"""Hermes' own gate functions over a URL corpus, timed per URL.

Usage: python gate_decision.py CORPUS_FILE RULES_FILE ITERATIONS
Prints one JSON object: {"per_url_ns" (best round), "mean_per_url_ns", "urls", "iterations",
"denied"}.
Runs inside the venv with hermes-agent 0.19.0; HERMES_HOME must point at a scratch dir.
"""
import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import unquote

corpus = Path(sys.argv[1]).read_text().splitlines()
rules = Path(sys.argv[2]).read_text().splitlines()
iterations = int(sys.argv[3])

home = Path(os.environ["HERMES_HOME"])
home.mkdir(parents=True, exist_ok=True)
import yaml  # noqa: E402  (installed with hermes-agent)

(home / "config.yaml").write_text(
    yaml.safe_dump({"security": {"website_blocklist": {"enabled": True, "domains": rules}}})
)

from agent.redact import _PREFIX_RE  # noqa: E402
from tools.url_safety import (  # noqa: E402
    is_safe_url,
    normalize_url_for_request,
    sensitive_query_param_name,
)
from tools.website_policy import check_website_access  # noqa: E402


def decide(raw: str) -> bool:
    """E1 (four forms + query names), E2 (is_safe_url), E4 (website policy): True = allowed."""
    raw = raw.strip()
    norm = normalize_url_for_request(raw)
    for form in (raw, unquote(raw), norm, unquote(norm)):
        if _PREFIX_RE.search(form):
            return False
    if sensitive_query_param_name(norm):
        return False
    if not is_safe_url(norm):
        return False
    return check_website_access(norm) is None


denied = sum(0 if decide(u) else 1 for u in corpus)  # warm-up and the decision count
# One round per iteration; the figure is the best round, as on the Rust side (a noisy 2-core
# machine's preemptions stay out of both), with the mean beside it.
rounds = []
for _ in range(iterations):
    start = time.perf_counter_ns()
    for u in corpus:
        decide(u)
    rounds.append((time.perf_counter_ns() - start) / len(corpus))
print(json.dumps({
    "per_url_ns": min(rounds),
    "mean_per_url_ns": sum(rounds) / len(rounds),
    "urls": len(corpus),
    "iterations": iterations,
    "denied": denied,
}))
