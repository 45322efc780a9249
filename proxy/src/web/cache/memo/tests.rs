//! Tests of the search memo, on tokio's paused clock.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;

const TTL: Duration = Duration::from_secs(20 * 60);

fn response(n: usize) -> Value {
    let web: Vec<Value> = (0..n)
        .map(|i| json!({"url": format!("https://r/{i}"), "position": i + 1}))
        .collect();
    json!({"success": true, "data": {"web": web}})
}

/// A fetch that counts its calls and records the count it was asked for.
fn counting<'a>(
    calls: &'a AtomicUsize,
    asked: &'a std::sync::Mutex<Vec<usize>>,
) -> impl FnOnce(usize) -> std::future::Ready<Result<Value, String>> + 'a {
    move |n| {
        calls.fetch_add(1, Ordering::SeqCst);
        asked.lock().expect("lock").push(n);
        std::future::ready(Ok(response(n)))
    }
}

#[test]
fn buckets_round_up_to_10_20_50_100() {
    let cases = [
        (0, 10),
        (1, 10),
        (5, 10),
        (10, 10),
        (11, 20),
        (20, 20),
        (21, 50),
        (50, 50),
        (51, 100),
        (100, 100),
        (1000, 100),
    ];
    for (limit, want) in cases {
        assert_eq!(bucket(limit), want, "limit {limit} must use bucket {want}");
    }
}

#[test]
fn queries_are_trimmed_lowercased_and_collapsed() {
    let cases = [
        ("  Rust  Async\tRuntime\n", "rust async runtime"),
        ("already normal", "already normal"),
        ("ÜBER Straße", "über straße"),
        ("   ", ""),
    ];
    for (query, want) in cases {
        assert_eq!(
            normalize_query(query),
            want,
            "{query:?} must normalise to {want:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_repeat_within_the_ttl_is_a_hit_and_asks_the_vendor_for_the_bucket() {
    // Seed 10: limit 5 asks for 10; a repeat differing in case and spacing hits.
    let memo = SearchMemo::new(true, TTL);
    let (calls, asked) = (AtomicUsize::new(0), std::sync::Mutex::new(Vec::new()));
    let (first, hit) = memo
        .get_or_fetch("searxng", "Rust memo", 5, counting(&calls, &asked))
        .await;
    assert!(!hit, "the first call must miss");
    assert_eq!(
        *asked.lock().expect("lock"),
        vec![10],
        "the vendor must be asked for the bucket"
    );
    tokio::time::advance(TTL - Duration::from_millis(1)).await;
    let (second, hit) = memo
        .get_or_fetch("searxng", "  rust   MEMO ", 7, counting(&calls, &asked))
        .await;
    assert!(hit, "a normalised repeat in the same bucket must hit");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "a hit must not call the vendor"
    );
    assert_eq!(
        first.expect("ok"),
        second.expect("ok"),
        "a hit must return the stored response"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    let (_, hit) = memo
        .get_or_fetch("searxng", "rust memo", 5, counting(&calls, &asked))
        .await;
    assert!(!hit, "at the ttl the entry must be expired");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "an expired entry must be fetched again"
    );
}

#[tokio::test(start_paused = true)]
async fn keys_separate_providers_and_buckets() {
    let memo = SearchMemo::new(true, TTL);
    let (calls, asked) = (AtomicUsize::new(0), std::sync::Mutex::new(Vec::new()));
    for (provider, limit) in [
        ("searxng", 5),
        ("tavily", 5),
        ("searxng", 15),
        ("searxng", 10),
        ("searxng", 101),
    ] {
        let _ = memo
            .get_or_fetch(provider, "q", limit, counting(&calls, &asked))
            .await;
    }
    assert_eq!(
        *asked.lock().expect("lock"),
        vec![10, 10, 20, 100],
        "limit 10 shares bucket 10 with limit 5"
    );
}

#[tokio::test(start_paused = true)]
async fn errors_are_not_stored() {
    let memo = SearchMemo::new(true, TTL);
    let calls = AtomicUsize::new(0);
    let failing = |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err::<Value, _>("vendor down"))
    };
    let (result, hit) = memo.get_or_fetch("exa", "q", 5, failing).await;
    assert_eq!(
        (result, hit),
        (Err("vendor down"), false),
        "the error must reach the caller"
    );
    let ok = |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok::<_, &str>(response(1)))
    };
    let (_, hit) = memo.get_or_fetch("exa", "q", 5, ok).await;
    assert!(!hit, "after an error the next call must fetch");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "both calls must reach the vendor"
    );
}

#[tokio::test(start_paused = true)]
async fn an_ok_response_saying_success_false_is_not_stored() {
    let memo = SearchMemo::new(true, TTL);
    for want_calls in [1, 2] {
        let (_, hit) = memo
            .get_or_fetch("searxng", "q", 5, |_| {
                std::future::ready(Ok::<_, String>(json!({"success": false, "error": "quota"})))
            })
            .await;
        assert!(
            !hit,
            "call {want_calls}: an unsuccessful response must not be served again"
        );
    }
    assert!(
        memo.is_empty(),
        "an unsuccessful response must not be stored"
    );
}

#[tokio::test(start_paused = true)]
async fn a_memo_of_result_lists_serves_them_too() {
    let memo: SearchMemo<Vec<String>> = SearchMemo::new(true, TTL);
    let calls = AtomicUsize::new(0);
    for want_hit in [false, true] {
        let (result, hit) = memo
            .get_or_fetch("brave-free", "q", 3, |n| {
                calls.fetch_add(1, Ordering::SeqCst);
                std::future::ready(Ok::<_, String>((0..n).map(|i| i.to_string()).collect()))
            })
            .await;
        assert_eq!(hit, want_hit, "the second call must hit");
        assert_eq!(
            result.map(|v| v.len()),
            Ok(10),
            "the bucket's worth must come back"
        );
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one vendor call must serve both"
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_identical_calls_make_one_fetch() {
    let memo = Arc::new(SearchMemo::new(true, TTL));
    let calls = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (memo, calls) = (Arc::clone(&memo), Arc::clone(&calls));
            tokio::spawn(async move {
                memo.get_or_fetch("searxng", "same", 5, |n| async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    Ok::<_, String>(response(n))
                })
                .await
            })
        })
        .collect();
    let mut hits = 0;
    for task in tasks {
        let (result, hit) = task.await.expect("a caller must not panic");
        assert!(result.is_ok(), "every caller must get the response");
        hits += usize::from(hit);
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "single-flight must make exactly one fetch"
    );
    assert_eq!(hits, 9, "the waiters must be served from the memo");
}

#[tokio::test(start_paused = true)]
async fn a_disabled_memo_always_fetches() {
    let memo = SearchMemo::new(false, TTL);
    let (calls, asked) = (AtomicUsize::new(0), std::sync::Mutex::new(Vec::new()));
    for _ in 0..3 {
        let (_, hit) = memo
            .get_or_fetch("searxng", "q", 5, counting(&calls, &asked))
            .await;
        assert!(!hit, "a disabled memo must never hit");
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "every call must reach the vendor"
    );
    assert!(memo.is_empty(), "a disabled memo must hold nothing");
}

#[tokio::test(start_paused = true)]
async fn a_hit_is_a_deep_copy() {
    let memo = SearchMemo::new(true, TTL);
    let (calls, asked) = (AtomicUsize::new(0), std::sync::Mutex::new(Vec::new()));
    let (first, _) = memo
        .get_or_fetch("searxng", "q", 5, counting(&calls, &asked))
        .await;
    let mut first = first.expect("ok");
    slice_results(&mut first, 1);
    let (second, hit) = memo
        .get_or_fetch("searxng", "q", 5, counting(&calls, &asked))
        .await;
    assert!(hit, "the repeat must hit");
    assert_eq!(
        second.expect("ok"),
        response(10),
        "slicing a returned copy must not touch the memo"
    );
}

#[tokio::test(start_paused = true)]
async fn the_lock_table_is_pruned_past_256_idle_locks() {
    let memo = SearchMemo::new(true, TTL);
    let (calls, asked) = (AtomicUsize::new(0), std::sync::Mutex::new(Vec::new()));
    let mut peak = 0;
    for i in 0..600 {
        let _ = memo
            .get_or_fetch("searxng", &format!("q{i}"), 5, counting(&calls, &asked))
            .await;
        peak = peak.max(memo.lock_count());
    }
    assert!(
        peak <= LOCK_TABLE_PRUNE_AT,
        "idle locks past 256 must be pruned, peak {peak}"
    );
    assert!(
        memo.lock_count() < 600 - LOCK_TABLE_PRUNE_AT,
        "the table must not grow with keys"
    );
    assert_eq!(
        memo.len(),
        600,
        "pruning locks must keep the stored responses"
    );
}

#[tokio::test(start_paused = true)]
async fn expired_responses_are_dropped_on_store() {
    let memo = SearchMemo::new(true, TTL);
    let (calls, asked) = (AtomicUsize::new(0), std::sync::Mutex::new(Vec::new()));
    let _ = memo
        .get_or_fetch("searxng", "old", 5, counting(&calls, &asked))
        .await;
    tokio::time::advance(TTL).await;
    let _ = memo
        .get_or_fetch("searxng", "new", 5, counting(&calls, &asked))
        .await;
    assert_eq!(
        memo.len(),
        1,
        "the expired response must be swept when a new one is stored"
    );
}

#[test]
fn slicing_cuts_every_result_list_to_the_limit() {
    let cases = [
        (
            "data.web",
            json!({"data": {"web": [1, 2, 3]}}),
            json!({"data": {"web": [1, 2]}}),
        ),
        (
            "web, news and images",
            json!({"data": {"web": [1, 2, 3], "news": [1, 2, 3], "images": [1], "total": 3}}),
            json!({"data": {"web": [1, 2], "news": [1, 2], "images": [1], "total": 3}}),
        ),
        (
            "data as the list",
            json!({"data": [1, 2, 3]}),
            json!({"data": [1, 2]}),
        ),
        (
            "no data",
            json!({"results": [1, 2, 3]}),
            json!({"results": [1, 2, 3]}),
        ),
    ];
    for (name, mut input, want) in cases {
        slice_results(&mut input, 2);
        assert_eq!(input, want, "{name} must be sliced to 2");
    }
}
