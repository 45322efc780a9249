//! What the LLM route counts and caps: the price table (`llm.prices`), the budgets per role
//! (`llm.budgets`), and what a prompt holding a secret gets (`llm.secrets`). Pure data and
//! arithmetic, shared by the gate (which counts and refuses) and the controller (which sums a
//! namespace's gates).
//!
//! A call's cost is its provider-reported usage times the price of its model:
//! `(uncached input × input + cache reads × cachedInput + cache writes × cacheWrite + output ×
//! output) / 1e6 × the tier multiplier`. Reasoning tokens are part of the output count on
//! every provider the route speaks, so they are not priced twice.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Role keys a budget may name (an auxiliary task counts under `auxiliary`).
pub const BUDGET_ROLES: &[&str] = &["main", "delegation", "cron", "auxiliary"];

/// What `llm.secrets` may say.
pub const SECRETS_MODES: &[&str] = &["refuse", "redact", "observe"];

/// `llm.prices:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPrices {
    /// Model id, or a prefix ending in `*`, → its price. Entries here win over the built-in
    /// table.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, RawPrice>,
    /// Service tier → multiplier, for entries that name no tiers of their own.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tiers: BTreeMap<String, f64>,
    /// Whether the built-in table ([`BUILTIN_PRICES`]) applies under `models` (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builtin: Option<bool>,
}

/// `llm.prices.models.<model>:` as written: USD per million tokens.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPrice {
    /// Uncached input tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<f64>,
    /// Input tokens read from the provider's prompt cache (default: `input`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Input tokens written to the prompt cache (default: `input`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Output tokens, reasoning included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<f64>,
    /// Service tier → multiplier for this model (default: `llm.prices.tiers`).
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tiers: BTreeMap<String, f64>,
}

/// `llm.budgets:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBudgets {
    /// Role → this pod's cap, enforced at its gate.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pod: BTreeMap<String, RawBudget>,
    /// Role → the namespace's cap, shared by every gate the fleet policy governs: the
    /// controller sums their spend and writes `exhausted`.
    #[serde(default)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub namespace: BTreeMap<String, RawBudget>,
    /// Written by the controller: the roles whose namespace budget is spent on `day`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exhausted: Option<RawExhausted>,
}

/// `llm.budgets.<scope>.<role>:` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBudget {
    /// Dollars per UTC day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_usd: Option<f64>,
    /// Tokens (input, cached, cache writes and output) per rolling minute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
}

/// `llm.budgets.exhausted:` as the controller writes it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawExhausted {
    /// The UTC day (`YYYY-MM-DD`) the roles are spent on; another day's list is ignored.
    #[serde(default)]
    pub day: String,
    /// The roles.
    #[serde(default)]
    pub roles: Vec<String>,
}

// === impl RawPrices ===

impl RawPrices {
    /// Nothing set (left out of a rendered policy).
    pub fn is_unset(&self) -> bool {
        self.models.is_empty() && self.tiers.is_empty() && self.builtin.is_none()
    }
}

// === impl RawBudgets ===

impl RawBudgets {
    /// Nothing set (left out of a rendered policy).
    pub fn is_unset(&self) -> bool {
        self.pod.is_empty() && self.namespace.is_empty() && self.exhausted.is_none()
    }
}

/// One price: USD per million tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Cache reads.
    pub cached_input: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// Output.
    pub output: f64,
    /// Tier multipliers of this entry; `None` uses the table's.
    pub tiers: Option<BTreeMap<String, f64>>,
    /// Where the figure comes from (`policy` for the policy's own entries).
    pub source: &'static str,
}

/// The validated price table.
#[derive(Clone, Debug, PartialEq)]
pub struct Prices {
    /// `(pattern, price)`: the policy's entries, then the built-in ones.
    pub entries: Vec<(String, Price)>,
    /// Tier multipliers for entries without their own.
    pub tiers: BTreeMap<String, f64>,
}

impl Default for Prices {
    fn default() -> Self {
        let mut errors = Vec::new();
        validate_prices(&RawPrices::default(), &mut |f, m| errors.push((f, m)))
    }
}

/// One validated budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    /// Dollars per UTC day.
    pub daily_usd: Option<f64>,
    /// Tokens per rolling minute.
    pub tokens_per_minute: Option<u64>,
}

/// The validated `llm.budgets`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budgets {
    /// Role → the pod's budget.
    pub pod: BTreeMap<String, Budget>,
    /// Role → the namespace's budget.
    pub namespace: BTreeMap<String, Budget>,
    /// `(day, roles)` whose namespace budget the controller found spent.
    pub exhausted: Option<(String, Vec<String>)>,
}

/// What a prompt holding a secret gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretsMode {
    /// Refused with `llm_secret_in_prompt` (enforce mode; counted as `would_refuse` in
    /// observe mode).
    Refuse,
    /// The secret replaced by `[redacted:<rule>]` and the call forwarded (enforce mode).
    Redact,
    /// Counted and logged, forwarded as sent.
    Observe,
}

// === impl SecretsMode ===

impl SecretsMode {
    /// Parse a mode name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "refuse" => Some(Self::Refuse),
            "redact" => Some(Self::Redact),
            "observe" => Some(Self::Observe),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Refuse => "refuse",
            Self::Redact => "redact",
            Self::Observe => "observe",
        }
    }
}

/// What one call used, in the provider's own counts, normalised: input excludes cache reads
/// and writes (as Anthropic reports it; OpenAI's `prompt_tokens` includes its cached tokens,
/// which are subtracted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Reasoning tokens, where the provider reports them (part of `output`).
    pub reasoning: u64,
}

// === impl Usage ===

impl Usage {
    /// Every token the call was billed for: input, cache reads and writes, output.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
            .saturating_add(self.output)
    }
}

// === impl Prices ===

impl Prices {
    /// The entry pricing `model`: an exact id first, then the longest matching prefix
    /// pattern; the policy's entries before the built-in ones at each step.
    pub fn price_for(&self, model: &str) -> Option<(&str, &Price)> {
        if let Some((p, price)) = self.entries.iter().find(|(p, _)| p == model) {
            return Some((p.as_str(), price));
        }
        self.entries
            .iter()
            .filter_map(|(p, price)| {
                let prefix = p.strip_suffix('*')?;
                model
                    .starts_with(prefix)
                    .then_some((p.as_str(), price, prefix.len()))
            })
            .fold(None, |best: Option<(&str, &Price, usize)>, c| match best {
                Some(b) if b.2 >= c.2 => Some(b),
                _ => Some(c),
            })
            .map(|(p, price, _)| (p, price))
    }

    /// The multiplier of `tier` for `price` (1 when neither the entry nor the table names
    /// the tier, or no tier is known).
    pub fn multiplier(&self, price: &Price, tier: Option<&str>) -> f64 {
        let Some(tier) = tier else { return 1.0 };
        price
            .tiers
            .as_ref()
            .unwrap_or(&self.tiers)
            .get(tier)
            .copied()
            .unwrap_or(1.0)
    }

    /// The cost in USD of `usage` on `model` served on `tier`; `None` when no entry prices
    /// the model.
    pub fn cost(&self, model: &str, usage: &Usage, tier: Option<&str>) -> Option<f64> {
        let (_, price) = self.price_for(model)?;
        Some(cost_of(price, usage) * self.multiplier(price, tier))
    }
}

/// `usage` at `price`, before any tier multiplier.
pub fn cost_of(price: &Price, usage: &Usage) -> f64 {
    // Integer token counts far below 2^53: exact as f64.
    let t = |n: u64| n as f64;
    (t(usage.input) * price.input
        + t(usage.cache_read) * price.cached_input
        + t(usage.cache_write) * price.cache_write
        + t(usage.output) * price.output)
        / 1_000_000.0
}

// === impl Budgets ===

impl Budgets {
    /// The pod budget of `role` (an auxiliary task under `auxiliary`).
    pub fn pod_for(&self, role: &str) -> Option<&Budget> {
        self.pod.get(budget_role(role))
    }

    /// Whether the controller found `role`'s namespace budget spent on `day`.
    pub fn namespace_exhausted(&self, role: &str, day: &str) -> bool {
        self.exhausted
            .as_ref()
            .is_some_and(|(d, roles)| d == day && roles.iter().any(|r| r == budget_role(role)))
    }
}

/// The budget role a route role counts under: `auxiliary:<task>` → `auxiliary`.
pub fn budget_role(role: &str) -> &str {
    if role.starts_with("auxiliary") {
        "auxiliary"
    } else {
        role
    }
}

/// Built-in prices, USD per million tokens: `(model, input, cached input, cache write,
/// output, tiers, source)`. The figures are the providers' published list prices as
/// Hermes' own pricing snapshot carries them (`agent/usage_pricing.py`, so the gate's count
/// and Hermes' `estimated_cost_usd` agree), plus the GPT-5 family from OpenAI's pricing page.
/// OpenAI's Flex tier is half price and Priority twice the price (its pricing page); a
/// provider's cache-write price where it has none is the input price. Claude Sonnet 5 is at
/// its list price ($3 / $15): its introductory price ended on 2026-08-31.
pub const BUILTIN_PRICES: &[(&str, f64, f64, f64, f64, TierTable, &str)] = &[
    ("gpt-5", 1.25, 0.125, 1.25, 10.0, TierTable::OpenAi, OPENAI),
    (
        "gpt-5-20*",
        1.25,
        0.125,
        1.25,
        10.0,
        TierTable::OpenAi,
        OPENAI,
    ),
    (
        "gpt-5-mini*",
        0.25,
        0.025,
        0.25,
        2.0,
        TierTable::OpenAi,
        OPENAI,
    ),
    (
        "gpt-5-nano*",
        0.05,
        0.005,
        0.05,
        0.40,
        TierTable::OpenAi,
        OPENAI,
    ),
    (
        "gpt-5.6-sol*",
        5.0,
        0.50,
        6.25,
        30.0,
        TierTable::OpenAi,
        GPT56,
    ),
    (
        "gpt-5.6-terra*",
        2.50,
        0.25,
        3.125,
        15.0,
        TierTable::OpenAi,
        GPT56,
    ),
    (
        "gpt-5.6-luna*",
        1.0,
        0.10,
        1.25,
        6.0,
        TierTable::OpenAi,
        GPT56,
    ),
    ("gpt-4.1", 2.0, 0.50, 2.0, 8.0, TierTable::OpenAi, OPENAI),
    (
        "gpt-4.1-mini",
        0.40,
        0.10,
        0.40,
        1.60,
        TierTable::OpenAi,
        OPENAI,
    ),
    (
        "gpt-4.1-nano",
        0.10,
        0.025,
        0.10,
        0.40,
        TierTable::OpenAi,
        OPENAI,
    ),
    ("gpt-4o", 2.50, 1.25, 2.50, 10.0, TierTable::OpenAi, OPENAI),
    (
        "gpt-4o-mini",
        0.15,
        0.075,
        0.15,
        0.60,
        TierTable::OpenAi,
        OPENAI,
    ),
    ("o3", 10.0, 2.50, 10.0, 40.0, TierTable::OpenAi, OPENAI),
    ("o3-mini", 1.10, 0.55, 1.10, 4.40, TierTable::OpenAi, OPENAI),
    (
        "claude-opus-4-8-fast",
        10.0,
        1.0,
        12.50,
        50.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-opus-4-8*",
        5.0,
        0.50,
        6.25,
        25.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-opus-4-7*",
        5.0,
        0.50,
        6.25,
        25.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-opus-4-6*",
        5.0,
        0.50,
        6.25,
        25.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-opus-4-5*",
        5.0,
        0.50,
        6.25,
        25.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-opus-4-1*",
        15.0,
        1.50,
        18.75,
        75.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-opus-4-2*",
        15.0,
        1.50,
        18.75,
        75.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-sonnet-5*",
        3.0,
        0.30,
        3.75,
        15.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-sonnet-4*",
        3.0,
        0.30,
        3.75,
        15.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-haiku-4-5*",
        1.0,
        0.10,
        1.25,
        5.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-3-5-sonnet*",
        3.0,
        0.30,
        3.75,
        15.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-3-5-haiku*",
        0.80,
        0.08,
        1.0,
        4.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-3-opus*",
        15.0,
        1.50,
        18.75,
        75.0,
        TierTable::None,
        ANTHROPIC,
    ),
    (
        "claude-3-haiku*",
        0.25,
        0.03,
        0.30,
        1.25,
        TierTable::None,
        ANTHROPIC,
    ),
];

const OPENAI: &str = "https://openai.com/api/pricing/";
const GPT56: &str = "https://openai.com/index/previewing-gpt-5-6-sol/";
const ANTHROPIC: &str = "https://platform.claude.com/docs/en/about-claude/pricing";

/// Which tier multipliers a built-in entry carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierTable {
    /// OpenAI's: `flex` 0.5, `priority` 2.
    OpenAi,
    /// None of its own (the policy's `llm.prices.tiers`, else 1).
    None,
}

fn builtin_tiers(table: TierTable) -> Option<BTreeMap<String, f64>> {
    match table {
        TierTable::OpenAi => Some(BTreeMap::from([
            ("flex".to_string(), 0.5),
            ("priority".to_string(), 2.0),
        ])),
        TierTable::None => None,
    }
}

/// Validate `llm.prices`; `err(field, message)` gets every problem.
pub fn validate_prices(raw: &RawPrices, err: &mut impl FnMut(String, String)) -> Prices {
    let mut entries = Vec::new();
    let per_million = |field: String, v: Option<f64>, err: &mut dyn FnMut(String, String)| match v {
        Some(v) if v.is_finite() && (0.0..=10_000.0).contains(&v) => Some(v),
        Some(v) => {
            err(
                field,
                format!("{v} is not a price; use USD per million tokens, 0 to 10000"),
            );
            None
        }
        None => None,
    };
    for (model, p) in &raw.models {
        let field = format!("llm.prices.models.{model}");
        if model.trim().is_empty() || model[..model.len().saturating_sub(1)].contains('*') {
            err(
                field.clone(),
                "a model id, or a prefix ending in `*` (`claude-sonnet-4*`)".into(),
            );
            continue;
        }
        let input = per_million(format!("{field}.input"), p.input, err);
        let output = per_million(format!("{field}.output"), p.output, err);
        let (Some(input), Some(output)) = (input, output) else {
            if p.input.is_none() || p.output.is_none() {
                err(
                    field,
                    "set both input and output (USD per million tokens)".into(),
                );
            }
            continue;
        };
        let cached = per_million(format!("{field}.cachedInput"), p.cached_input, err);
        let write = per_million(format!("{field}.cacheWrite"), p.cache_write, err);
        let tiers = validate_tiers(&p.tiers, &format!("{field}.tiers"), err);
        entries.push((
            model.clone(),
            Price {
                input,
                cached_input: cached.unwrap_or(input),
                cache_write: write.unwrap_or(input),
                output,
                tiers: (!tiers.is_empty()).then_some(tiers),
                source: "policy",
            },
        ));
    }
    if raw.builtin.unwrap_or(true) {
        for &(model, input, cached_input, cache_write, output, tiers, source) in BUILTIN_PRICES {
            entries.push((
                model.to_string(),
                Price {
                    input,
                    cached_input,
                    cache_write,
                    output,
                    tiers: builtin_tiers(tiers),
                    source,
                },
            ));
        }
    }
    Prices {
        entries,
        tiers: validate_tiers(&raw.tiers, "llm.prices.tiers", err),
    }
}

fn validate_tiers(
    raw: &BTreeMap<String, f64>,
    field: &str,
    err: &mut impl FnMut(String, String),
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (tier, m) in raw {
        if m.is_finite() && (0.0..=100.0).contains(m) && !tier.trim().is_empty() {
            out.insert(tier.clone(), *m);
        } else {
            err(
                format!("{field}.{tier}"),
                format!("{m} is not a multiplier; use 0 to 100 (1 = list price)"),
            );
        }
    }
    out
}

/// Validate `llm.budgets`.
pub fn validate_budgets(raw: &RawBudgets, err: &mut impl FnMut(String, String)) -> Budgets {
    let mut scope = |name: &str, map: &BTreeMap<String, RawBudget>| {
        let mut out = BTreeMap::new();
        for (role, b) in map {
            let field = format!("llm.budgets.{name}.{role}");
            if !BUDGET_ROLES.contains(&role.as_str()) {
                err(
                    field,
                    format!(
                        "'{role}' is not a budget role; use {}",
                        BUDGET_ROLES.join(", ")
                    ),
                );
                continue;
            }
            let daily_usd = match b.daily_usd {
                Some(v) if v.is_finite() && v >= 0.0 => Some(v),
                Some(v) => {
                    err(
                        format!("{field}.dailyUsd"),
                        format!("{v} is not a dollar amount; use 0 or more"),
                    );
                    continue;
                }
                None => None,
            };
            if daily_usd.is_none() && b.tokens_per_minute.is_none() {
                err(field, "set dailyUsd, tokensPerMinute or both".into());
                continue;
            }
            out.insert(
                role.clone(),
                Budget {
                    daily_usd,
                    tokens_per_minute: b.tokens_per_minute,
                },
            );
        }
        out
    };
    let pod = scope("pod", &raw.pod);
    let namespace = scope("namespace", &raw.namespace);
    let exhausted = raw.exhausted.as_ref().and_then(|e| {
        let day_ok = e.day.len() == 10
            && e.day.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        if !day_ok {
            err(
                "llm.budgets.exhausted.day".into(),
                format!("'{}' is not a UTC day (YYYY-MM-DD)", e.day),
            );
            return None;
        }
        for r in &e.roles {
            if !BUDGET_ROLES.contains(&r.as_str()) {
                err(
                    "llm.budgets.exhausted.roles".into(),
                    format!(
                        "'{r}' is not a budget role; use {}",
                        BUDGET_ROLES.join(", ")
                    ),
                );
            }
        }
        Some((e.day.clone(), e.roles.clone()))
    });
    Budgets {
        pod,
        namespace,
        exhausted,
    }
}

#[cfg(test)]
mod tests;
