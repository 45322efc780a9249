"""fleetgate's Grafana dashboards, built with Grafana's own dashboards-as-code SDK.

`python build.py OUT_DIR...` writes egress.json, fleet-cost.json, llm.json and controller.json
into each OUT_DIR (the chart's `dashboards/` and `deploy/dashboards/`). The SDK's typed builders
give panels, targets and variables the shape Grafana's dashboard schema defines, so a field
cannot be misspelt; `tests/tests/observability.rs` checks the committed JSON is this script's
output and runs every panel query against a real Prometheus scraping a real gate.

Every panel reads one Prometheus data source chosen by the `datasource` variable; queries use
Grafana's `$__rate_interval` / `$__range` and the `namespace` variable (all namespaces by
default).
"""

import json
import sys

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
NS = 'namespace=~"$namespace"'
RATE = "$__rate_interval"


def query(expr, legend="", ref="A", instant=False):
    q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)
    return q.instant() if instant else q


def framed(panel, title, description, unit, width, height):
    """The settings every panel shares: title, description, data source, unit, size."""
    return (
        panel.title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .span(width)
        .height(height)
    )


def series(title, description, exprs, unit="short", width=12):
    panel = framed(timeseries.Panel(), title, description, unit, width, 8)
    for i, (expr, legend) in enumerate(exprs):
        panel = panel.with_target(query(expr, legend, chr(ord("A") + i)))
    return panel


def rate_by(metric, by, prefix=""):
    """Per-second rate of a counter summed by `by`, as an (expr, legend) pair for `series`."""
    legend = " ".join("{{" + label + "}}" for label in by)
    return (f"sum by ({', '.join(by)}) (rate({metric}{{{NS}}}[{RATE}]))", f"{prefix}{legend}")


def quantiles(metric, by):
    """p50 and p95 of a histogram, per `by`, as (expr, legend) pairs for `series`."""
    grouping = ", ".join(["le", *by])
    legend = " ".join("{{" + label + "}}" for label in by)
    return [
        (f"histogram_quantile({q}, sum by ({grouping}) (rate({metric}_bucket{{{NS}}}[{RATE}])))",
         f"{name} {legend}".strip())
        for q, name in [(0.5, "p50"), (0.95, "p95")]
    ]


def top(title, description, expr, unit="short", width=12):
    panel = framed(table.Panel(), title, description, unit, width, 8)
    return panel.with_target(query(expr, "", "A", instant=True))


def single(title, description, expr, unit="short", width=6):
    panel = framed(stat.Panel(), title, description, unit, width, 4)
    return panel.with_target(query(expr, "", "A"))


def base(uid, title, description):
    return (
        db.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["fleetgate"])
        .time("now-6h", "now")
        .refresh("30s")
        .with_variable(db.DatasourceVariable("datasource").label("Data source").type("prometheus"))
        .with_variable(
            db.QueryVariable("namespace")
            .label("Namespace")
            .datasource(DS)
            .query("label_values(fleetgate_gate_decisions_total, namespace)")
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
    )


def egress():
    d = base("fleetgate-egress", "fleetgate / Egress",
             "What the gates let out and refuse, by listener, gate, verdict and reason.")
    return (
        d.with_panel(single("Refusals (range)", "Refused egress requests in the selected range.",
                            f'sum(increase(fleetgate_gate_decisions_total{{verdict="deny",{NS}}}[$__range]))'))
        .with_panel(single("Cloud metadata attempts (range)", "Requests refused at the metadata floor; any is worth a look.",
                           f'sum(increase(fleetgate_gate_decisions_total{{reason="ip_cloud_metadata",{NS}}}[$__range]))'))
        .with_panel(single("Open tunnels", "CONNECT tunnels open now.",
                           f"sum(fleetgate_listener_active_tunnels{{{NS}}})"))
        .with_panel(single("Log lines dropped (range)", "Decision lines lost to a full log queue.",
                           f"sum(increase(fleetgate_log_lines_dropped_total{{{NS}}}[$__range]))"))
        .with_panel(series("Gate decisions by gate and verdict", "Every gate's verdicts per second.",
                           [rate_by("fleetgate_gate_decisions_total", ["gate", "verdict"])], "reqps"))
        .with_panel(top("Top refused reasons", "The ten most frequent refusal codes in the range.",
                        f'topk(10, sum by (reason) (increase(fleetgate_gate_decisions_total{{verdict="deny",{NS}}}[$__range])))'))
        .with_panel(series("Listener requests by verdict", "Forward proxy and transparent capture requests per second.",
                           [rate_by("fleetgate_listener_requests_total", ["listener", "proxy_type", "verdict"])], "reqps"))
        .with_panel(series("Listener refusals by code", "What the egress listeners refused, by code.",
                           [rate_by("fleetgate_listener_refusals_total", ["listener", "code"])], "reqps"))
        .with_panel(series("Extract and search latency", "The api listener's request duration, p50 and p95.",
                           quantiles("fleetgate_http_request_duration_seconds", ["route"]), "s"))
        .with_panel(series("Bytes relayed", "Bytes through the egress listeners (in: agent to upstream).",
                           [rate_by("fleetgate_listener_bytes_total", ["listener", "direction"])], "Bps"))
        .with_panel(series("Cache lookups by outcome", "Hits, misses, stale entries and why a page was not cached.",
                           [rate_by("fleetgate_cache_lookups_total", ["outcome"])], "reqps"))
        .with_panel(series("Accept errors", "Failed accepts; resource means out of descriptors or memory.",
                           [(f"sum by (listener, kind) (rate(fleetgate_listener_accept_errors_total{{{NS}}}[{RATE}])) or vector(0)", "{{listener}} {{kind}}")], "short"))
    )


def fleet_cost():
    d = base("fleetgate-fleet-cost", "fleetgate / Fleet cost",
             "What the fleet's cron jobs cost, per FleetPolicy and per job, and which jobs waste runs.")
    return (
        d.with_panel(single("Cron cost per day (all policies)", "USD per day of every selected pod's cron jobs.",
                            f"sum(fleetgate_controller_fleet_cost_per_day_usd{{{NS}}})", "currencyUSD"))
        .with_panel(single("Flagged jobs", "Cron jobs flagged mostly_empty or frequent_without_gate.",
                           f"sum(fleetgate_controller_fleet_flagged_jobs{{{NS}}})"))
        .with_panel(series("Cron cost per day by FleetPolicy", "USD per day per FleetPolicy, as the controller last scraped it.",
                           [(f"sum by (namespace, policy) (fleetgate_controller_fleet_cost_per_day_usd{{{NS}}})", "{{namespace}}/{{policy}}")], "currencyUSD"))
        .with_panel(top("Costliest cron jobs", "USD per day per cron job, from each gate's report.",
                        f"topk(20, sum by (namespace, pod, job) (fleetgate_report_cron_cost_per_day_usd{{{NS}}}))", "currencyUSD"))
        .with_panel(top("Flags per job", "1 where a job carries the flag.",
                        f"sum by (namespace, job, flag) (fleetgate_report_cron_flagged{{{NS}}})"))
        .with_panel(series("Empty-run share by job", "Share of a job's runs that ended without a reply.",
                           [(f"max by (namespace, job) (fleetgate_report_cron_empty_run_share{{{NS}}})", "{{namespace}} {{job}}")], "percentunit"))
        .with_panel(series("Runs per job (report window)", "Runs each cron job made over the report window.",
                           [(f"sum by (namespace, job) (fleetgate_report_cron_runs{{{NS}}})", "{{namespace}} {{job}}")]))
    )


def llm():
    d = base("fleetgate-llm", "fleetgate / LLM",
             "What the agents ask their providers for and what they are served, per role.")
    return (
        d.with_panel(series("Requests by role and model", "Completion calls per second.",
                            [rate_by("fleetgate_llm_requests_total", ["role", "model"])], "reqps"))
        .with_panel(series("Requests by effort and requested tier", "The reasoning effort and service tier on the wire.",
                           [rate_by("fleetgate_llm_requests_total", ["role", "effort", "tier"])], "reqps"))
        .with_panel(series("Responses by served tier", "The tier the provider says it served.",
                           [rate_by("fleetgate_llm_responses_total", ["role", "served_tier"])], "reqps"))
        .with_panel(top("Served off the pinned tier (range)", "Responses whose served tier differs from the role's pin.",
                        f"sum by (role, served_tier) (increase(fleetgate_llm_tier_mismatches_total{{{NS}}}[$__range]))"))
        .with_panel(series("Time to first byte", "From the request to the provider's response head, p50 and p95.",
                           quantiles("fleetgate_llm_time_to_first_byte_seconds", ["role"]), "s"))
        .with_panel(series("Refusals and rewrites", "Enforce decisions (or, in observe mode, what enforce would do).",
                           [rate_by("fleetgate_llm_refusals_total", ["role", "code", "action"], "refuse "),
                            rate_by("fleetgate_llm_rewrites_total", ["role", "field", "action"], "rewrite ")], "reqps"))
        .with_panel(series("Spend today and budget use", "Each pod's dollars today (UTC day) per role, and the share of its daily pod budget spent (alert at 80 %).",
                           [(f"sum by (role) (fleetgate_llm_spend_usd{{{NS}}})", "$ spent {{role}}"),
                            (f"max by (role) (fleetgate_llm_spend_usd{{{NS}}} / ignoring(scope) fleetgate_llm_budget_usd{{{NS},scope=\"pod\"}})", "share of budget {{role}}")]))
        .with_panel(series("Cost and tokens", "Dollars per hour (usage times llm.prices) and tokens per second by type.",
                           [(f"sum by (role, model) (rate(fleetgate_llm_cost_usd_total{{{NS}}}[{RATE}])) * 3600", "$/h {{role}} {{model}}"),
                            (f"sum by (type) (rate(fleetgate_llm_tokens_total{{{NS}}}[{RATE}]))", "tokens/s {{type}}")]))
        .with_panel(top("Secrets in prompts and calls over budget (range)", "Prompts holding a secret, by rule and action, and calls refused over a budget.",
                        f"sum by (role, rule, action) (increase(fleetgate_llm_prompt_secrets_total{{{NS}}}[$__range])) or sum by (role, action) (increase(fleetgate_llm_refusal_attempts_total{{{NS},code=\"llm_budget_exceeded\"}}[$__range]))"))
    )


def controller():
    d = base("fleetgate-controller", "fleetgate / Controller",
             "The controller's reconciles, writes, webhook and the gates it scrapes.")
    return (
        d.with_panel(series("Reconciles", "Reconcile runs per second.",
                            [(f"sum(rate(fleetgate_controller_reconcile_runs_total{{{NS}}}[{RATE}]))", "reconciles")], "ops"))
        .with_panel(series("Reconcile failures by code", "Failed reconciles by error code.",
                           [rate_by("fleetgate_controller_reconcile_failures_total", ["error"])], "ops"))
        .with_panel(series("Reconcile duration", "p50 and p95 of one reconcile.",
                           quantiles("fleetgate_controller_reconcile_duration_seconds", []), "s"))
        .with_panel(series("Writes to the API server", "ConfigMap applies and status patches; a steady fleet writes nothing.",
                           [rate_by("fleetgate_controller_writes_total", ["object"])], "ops"))
        .with_panel(series("Gate scrape failures by reason", "Gates that did not answer the controller's report scrape.",
                           [rate_by("fleetgate_controller_scrape_failures_total", ["reason"])], "ops"))
        .with_panel(series("Pods selected, reporting and current", "Per FleetPolicy: selected pods, those whose gate reports, those on the current policy.",
                           [(f"sum by (namespace, policy, state) (fleetgate_controller_fleet_pods{{{NS}}})", "{{namespace}}/{{policy}} {{state}}")]))
        .with_panel(series("Webhook reviews by outcome", "Admission reviews answered by the injection webhook.",
                           [rate_by("fleetgate_controller_webhook_reviews_total", ["outcome"])], "ops"))
        .with_panel(series("Leader", "Which replica holds the reconcile lease; the sum must be exactly 1.",
                           [(f"max by (pod) (fleetgate_controller_leader{{{NS}}})", "{{pod}}")]))
        .with_panel(series("Lease changes and fenced writes", "Acquired or lost leases, and writes stopped because the lease could not be confirmed.",
                           [rate_by("fleetgate_controller_lease_transitions_total", ["change"], "lease "),
                            rate_by("fleetgate_controller_fenced_writes_total", ["reason"], "fenced ")], "ops"))
    )


def main():
    boards = {"egress.json": egress(), "fleet-cost.json": fleet_cost(), "llm.json": llm(),
              "controller.json": controller()}
    for out in sys.argv[1:]:
        for name, board in boards.items():
            with open(f"{out}/{name}", "w", encoding="utf-8") as f:
                json.dump(board.build(), f, cls=JSONEncoder, indent=2, sort_keys=True)
                f.write("\n")


if __name__ == "__main__":
    main()
