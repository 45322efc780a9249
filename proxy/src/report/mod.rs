//! Fleet reports: what a Hermes home says the agent really does (read-only).
