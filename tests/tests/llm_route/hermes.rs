//! Hermes through the gate (placeholder).
