//! Gate E2: SSRF filter with the gate's own resolver.
