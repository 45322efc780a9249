//! The tunnel cap (fixed and lowered by a reload), the drain, and which limit wins.

use super::*;

#[test]
fn the_tunnel_cap_refuses_past_its_size_and_frees_on_drop() {
    let cap = TunnelCap::default();
    let first = cap.try_acquire(2).expect("first permit must be granted");
    let _second = cap.try_acquire(2).expect("second permit must be granted");
    assert!(
        cap.try_acquire(2).is_none(),
        "a third tunnel must be refused"
    );
    drop(first);
    assert!(
        cap.try_acquire(2).is_some(),
        "a closed tunnel must free its permit"
    );
    assert!(
        TunnelCap::default().try_acquire(0).is_none(),
        "a zero cap must refuse every tunnel"
    );
}

#[test]
fn a_lowered_cap_refuses_new_tunnels_but_keeps_open_ones() {
    let cap = TunnelCap::default();
    let held: Vec<_> = (0..3).filter_map(|_| cap.try_acquire(3)).collect();
    assert_eq!(held.len(), 3, "three tunnels fit under a cap of 3");
    assert!(
        cap.try_acquire(2).is_none(),
        "after a reload to 2, a fourth tunnel must be refused"
    );
    assert_eq!(cap.open(), 3, "the open tunnels must stay open");
    drop(held);
    assert!(cap.try_acquire(2).is_some(), "closed tunnels free places");
}

#[test]
fn command_line_overrides_win_over_the_policy_which_wins_over_defaults() {
    let policy = Policy::parse(
        b"version: v1\negress:\n  maxTunnels: 7\n  timeouts: {idleSeconds: 9, connectSeconds: 2}\nfetch:\n  headerTimeoutMs: 1500\n",
        std::path::Path::new("."),
    )
    .expect("test policy must load");
    let from_policy = Limits::default().effective(&policy);
    assert_eq!(from_policy.max_tunnels, 7, "the policy's cap applies");
    assert_eq!(
        from_policy.idle,
        Duration::from_secs(9),
        "the policy's idle applies"
    );
    assert_eq!(
        from_policy.connect,
        Duration::from_secs(2),
        "egress connect wins over fetch"
    );
    assert_eq!(
        from_policy.header,
        Duration::from_millis(1500),
        "an unset egress header timeout follows fetch.headerTimeoutMs"
    );
    let flags = Limits {
        max_tunnels: Some(3),
        idle_timeout: Some(Duration::from_secs(1)),
        ..Limits::default()
    };
    let overridden = flags.effective(&policy);
    assert_eq!(
        overridden.max_tunnels, 3,
        "--max-tunnels overrides the policy"
    );
    assert_eq!(
        overridden.idle,
        Duration::from_secs(1),
        "the idle flag overrides"
    );
    let empty =
        Policy::parse(b"version: v1\n", std::path::Path::new(".")).expect("empty policy must load");
    assert_eq!(
        Limits::default().effective(&empty).max_tunnels,
        DEFAULT_MAX_TUNNELS,
        "nothing set means the default cap"
    );
}

#[tokio::test]
async fn a_drain_waits_until_the_last_guard_drops() {
    let inflight = Inflight::default();
    let a = inflight.enter();
    let b = inflight.enter();
    let waiter = tokio::spawn({
        let inflight = inflight.clone();
        async move { inflight.wait_idle().await }
    });
    drop(a);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiter.is_finished(), "one unit is still in flight");
    drop(b);
    tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the drain must end once nothing is in flight")
        .expect("the waiter must not panic");
}
