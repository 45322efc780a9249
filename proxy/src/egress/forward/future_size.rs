//! The size of the future an `async fn` returns, read from the fn item alone (no arguments
//! built, nothing polled). A spawned connection's task is allocated at the size of its future's
//! largest state for as long as the connection lives, so tests pin that size with these.

use std::future::Future;

/// The size of the future `f(a, b, c)` returns.
pub(crate) fn of3<A, B, C, F: Future>(_: impl FnOnce(A, B, C) -> F) -> usize {
    size_of::<F>()
}

/// The size of the future `f(a, b, c, d)` returns.
pub(crate) fn of4<A, B, C, D, F: Future>(_: impl FnOnce(A, B, C, D) -> F) -> usize {
    size_of::<F>()
}
