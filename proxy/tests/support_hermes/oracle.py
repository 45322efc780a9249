"""fleetgate differential oracle: Hermes' own E1 URL functions over a corpus.

Usage: python -I oracle.py IN.json OUT.json
IN is {"corpus": [str, ...], "bench": [str, ...]}. OUT holds one record per corpus string
and per-string timings of the prefix search on the bench list. Nothing is fetched.

fleetgate implements the credential-prefix set of Hermes' agent/redact.py at @006e9a1c
(56 families, escape-relief leading boundary). An installed Hermes release may carry an older
list; DELTAS below turn the installed list into that set, one documented step at a time, and
each record names the first step that changed its result, so every difference between the
installed release and fleetgate is attributed to a named class.
"""

import importlib.metadata
import json
import re
import sys
import time
from urllib.parse import unquote, urlsplit

from agent import redact
from tools.url_safety import normalize_url_for_request, sensitive_query_param_name

PLAIN_LEAD = r"(?<![A-Za-z0-9_-])"
RELIEF_LEAD = (
    r"(?:(?<![A-Za-z0-9_-])|(?<=\\[A-Za-z])|(?<=\\u[0-9a-fA-F]{4})|(?<=\\x[0-9a-fA-F]{2}))"
)
TRAIL = r"(?![A-Za-z0-9_-])"
SK_OLD = r"sk-[A-Za-z0-9_-]{10,}"
SK_NEW = r"sk-[A-Za-z0-9_-](?:\.?[A-Za-z0-9_-]){9,}"
AM_OLD = r"am_[A-Za-z0-9_-]{10,}"
AM_NEW = r"am_(?:org_)?[A-Za-z0-9]{20,}"
ADDED = [
    r"glpat-[A-Za-z0-9_\-]{10,}",
    r"gloas-[A-Za-z0-9_\-]{10,}",
    r"gldt-[A-Za-z0-9_\-]{10,}",
    r"glrt-[A-Za-z0-9_.\-]{10,}",
    r"glrtr-[A-Za-z0-9_.\-]{10,}",
    r"glcbt-[A-Za-z0-9_\-]{10,}",
    r"glptt-[A-Za-z0-9_\-]{10,}",
    r"glft-[A-Za-z0-9_\-]{10,}",
    r"glimt-[A-Za-z0-9_\-]{10,}",
    r"glagent-[A-Za-z0-9_\-]{10,}",
    r"glsoat-[A-Za-z0-9_\-]{10,}",
    r"glffct-[A-Za-z0-9_\-]{10,}",
    r"glwt-[A-Za-z0-9_\-]{10,}",
    r"GR1348941[A-Za-z0-9_\-]{10,}",
    r"pk-lf-[A-Za-z0-9\-]{8,}",
]


def build(lead, patterns):
    return re.compile(lead + "(" + "|".join(patterns) + ")" + TRAIL)


def stages():
    """[(name, regex)]: the installed set first, then each delta applied cumulatively."""
    pats = list(redact._PREFIX_PATTERNS)
    installed = redact._PREFIX_RE.pattern
    if installed == build(PLAIN_LEAD, pats).pattern:
        lead = PLAIN_LEAD
    elif installed == build(RELIEF_LEAD, pats).pattern:
        lead = RELIEF_LEAD
    else:
        sys.exit("oracle: unrecognised _PREFIX_RE shape in the installed Hermes")
    out = [("installed", build(lead, pats))]
    if lead == PLAIN_LEAD:
        lead = RELIEF_LEAD
        out.append(("escape_relief_boundary", build(lead, pats)))
    if SK_OLD in pats:
        pats[pats.index(SK_OLD)] = SK_NEW
        out.append(("sk_dotted_body", build(lead, pats)))
    if AM_OLD in pats:
        pats[pats.index(AM_OLD)] = AM_NEW
        out.append(("agentmail_alnum_20", build(lead, pats)))
    missing = [p for p in ADDED if p not in pats]
    if missing:
        pats.extend(missing)
        out.append(("gitlab_langfuse_families", build(lead, pats)))
    if len(pats) != 56 or SK_NEW not in pats or AM_NEW not in pats:
        sys.exit("oracle: the pattern list does not reach the 56-family set")
    return out


def span(regex, s):
    m = regex.search(s)
    if m is None:
        return None
    start = len(s[: m.start()].encode("utf-8"))
    return [start, start + len(m.group(0).encode("utf-8"))]


def first_delta(stage_list, s):
    base = span(stage_list[0][1], s)
    for name, regex in stage_list[1:]:
        if span(regex, s) != base:
            return name
    return None


def host_step(s):
    """[hostname, idna] when Hermes' normaliser reaches the IDNA step with a non-ASCII host."""
    raw = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)\s+", r"\1", s.strip())
    try:
        parts = urlsplit(raw)
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme.lower() not in {"http", "https"} or not host or host.isascii():
        return None
    try:
        return [host, host.encode("idna").decode("ascii")]
    except UnicodeError:
        return [host, None]


def decision(spec, s):
    """Hermes' E1 decision for one extract item (web_tools.web_extract_tool)."""
    item = s.strip()
    if not item:
        return "invalid"
    n = normalize_url_for_request(item)
    if any(spec.search(f) for f in (item, unquote(item), n, unquote(n))):
        return "secret"
    key = sensitive_query_param_name(n)
    return "query:" + key if key else "allow"


def record(stage_list, s):
    spec = stage_list[-1][1]
    return {
        "p": span(spec, s),
        "d": first_delta(stage_list, s),
        "q": sensitive_query_param_name(s),
        "n": normalize_url_for_request(s),
        "u": unquote(s),
        "h": host_step(s),
        "g": decision(spec, s),
    }


def per_string_ns(fn, strings, passes=30):
    """Best single pass of `fn` over `strings`, in nanoseconds per string."""
    best = float("inf")
    for _ in range(passes):
        t = time.perf_counter()
        for s in strings:
            fn(s)
        best = min(best, (time.perf_counter() - t) / len(strings) * 1e9)
    return best


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        data = json.load(f)
    stage_list = stages()
    out = {
        "version": importlib.metadata.version("hermes-agent"),
        "deltas": [name for name, _ in stage_list[1:]],
        "records": [record(stage_list, s) for s in data["corpus"]],
        "ns_spec": per_string_ns(stage_list[-1][1].search, data["bench"]),
        "ns_installed": per_string_ns(redact._PREFIX_RE.search, data["bench"]),
        "ns_e1": per_string_ns(lambda s: decision(stage_list[-1][1], s), data["bench"], 10),
    }
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
