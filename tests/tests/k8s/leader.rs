//! Leader election on a real Lease: two controller processes as installed (the chart's Role,
//! TokenRequest tokens), one holder; `kill -9` the holder and the other takes the Lease over
//! and re-renders the next edit (failover time printed). Neither is ever refused by RBAC.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::replica::start_as_installed;
use crate::support::{self, char_limit_policy, ensure_crds, eventually, kubectl};

fn holder(lease: &Lease) -> Option<String> {
    lease.spec.as_ref()?.holder_identity.clone()
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s"
)]
async fn a_killed_leader_hands_the_lease_to_the_other_replica_which_then_reconciles() {
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "leader").await;
    support::install_chart(&ns, &[]);
    let mut replicas = [
        Some(start_as_installed(&ns, "replica-a")),
        Some(start_as_installed(&ns, "replica-b")),
    ];
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let first = eventually(Duration::from_secs(60), "a Lease holder", || async {
        let lease = leases.get_opt("fleetgate-controller").await.ok()??;
        holder(&lease).filter(|h| h.starts_with("replica-"))
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let apply = |text: String| {
        kubectl(
            &["-n", &ns, "apply", "--server-side", "-f", "-"],
            Some(&text),
        )
    };
    apply(char_limit_policy(2001).to_string());
    let rendered = eventually(Duration::from_secs(60), "the first render", || async {
        cms.get_opt("fleet-managed").await.ok()?
    })
    .await;

    // kill -9 the holder (the guard's drop sends SIGKILL).
    let index = usize::from(first == "replica-b");
    let killed = tokio::time::Instant::now();
    drop(replicas[index].take());
    let second = eventually(Duration::from_secs(60), "a new Lease holder", || async {
        let lease = leases.get_opt("fleetgate-controller").await.ok()??;
        holder(&lease).filter(|h| *h != first)
    })
    .await;
    let took_over = killed.elapsed();
    apply(char_limit_policy(2002).to_string());
    eventually(
        Duration::from_secs(60),
        "the new leader's render",
        || async {
            let now = cms.get("fleet-managed").await.ok()?;
            (now.data != rendered.data).then_some(())
        },
    )
    .await;
    println!(
        "leader election: {first} killed, {second} took the Lease over after {took_over:?}, rendered the next edit after {:?}",
        killed.elapsed()
    );
    let survivor = replicas[1 - index].as_ref().expect("the other replica");
    let refused = survivor.refusals();
    assert!(
        refused.is_empty(),
        "the API server must never refuse a replica as installed (RBAC): {refused:#?}"
    );
}
