//! Two controller replicas through a control-plane outage. Both run as the chart installs
//! them ([`crate::replica::start_as_installed`]). The API server is stopped for 30 s and
//! started again, then etcd is killed and started again; after each, both replicas are still
//! running, exactly one leads, and the next edit is rendered. Throughout, only the Lease
//! holder writes: each edit costs exactly one ConfigMap write, made by the replica holding
//! the Lease (each replica's own `fleetgate_controller_writes_total`), one new
//! resourceVersion of the ConfigMap, and one field manager owns it; no edit and no outage
//! makes a second write.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::replica::{ControllerProcess, start_as_installed};
use crate::support::{self, char_limit_policy, ensure_crds, eventually, kubectl};

/// How long the API server stays down.
const OUTAGE: Duration = Duration::from_secs(30);

/// ConfigMap writes each replica counted.
fn config_map_writes(replicas: &[(&str, &ControllerProcess)]) -> Vec<f64> {
    replicas
        .iter()
        .map(|(name, r)| {
            r.metric("fleetgate_controller_writes_total", "object=\"config_map\"")
                .unwrap_or_else(|| panic!("{name}'s admin listener must answer"))
        })
        .collect()
}

/// Every resourceVersion of `fleet-managed` seen by polling it every 20 ms, in order.
fn record_versions(cms: Api<ConfigMap>) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let out = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            if let Ok(Some(cm)) = cms.get_opt("fleet-managed").await {
                let rv = cm.metadata.resource_version.unwrap_or_default();
                let mut seen = out.lock().expect("the record");
                if seen.last() != Some(&rv) {
                    seen.push(rv);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    seen
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-cluster"),
    ignore = "real cluster (Kubernetes built from Go source): tests/run k8s, or cargo test -p fleetgate-e2e --features real-cluster --test k8s_cluster_wide"
)]
async fn both_replicas_ride_out_an_api_server_outage_and_an_etcd_restart_and_only_the_holder_writes()
 {
    let _serial = crate::serial().await;
    let plane = support::plane();
    let _ = ensure_crds();
    let client = support::client().await;
    let ns = support::namespace(&client, "outage").await;
    support::install_chart(&ns, &[]);
    let a = start_as_installed(&ns, "replica-a");
    let b = start_as_installed(&ns, "replica-b");
    let replicas = [("replica-a", &a), ("replica-b", &b)];
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // The replica that leads now: the Lease names it with a renewal that has not run out,
    // and it alone says it leads (`fleetgate_controller_leader`). Right after an outage the
    // Lease may still name a holder whose renewal ran out while another takes it over.
    let holder = || async {
        let lease = leases.get_opt("fleetgate-controller").await.ok()??;
        let spec = lease.spec?;
        let renewed = spec.renew_time?.0;
        let duration = i64::from(spec.lease_duration_seconds?);
        let now = k8s_openapi::jiff::Timestamp::now();
        if now.as_second() - renewed.as_second() >= duration {
            return None;
        }
        let name = spec.holder_identity?;
        let leading: Vec<&str> = replicas
            .iter()
            .filter(|(_, r)| r.metric("fleetgate_controller_leader", "") == Some(1.0))
            .map(|(n, _)| *n)
            .collect();
        (leading == [name.as_str()]).then_some(name)
    };
    let versions = record_versions(cms.clone());
    for (name, r) in &replicas {
        eventually(
            Duration::from_secs(60),
            &format!("{name}'s admin listener"),
            || async {
                r.metric("fleetgate_controller_writes_total", "")
                    .map(|_| ())
            },
        )
        .await;
    }

    // One edit: rendered once, by the holder, and by nobody else.
    let edit = |char_limit: u64, phase: &'static str| {
        let cms = cms.clone();
        let ns = ns.clone();
        async move {
            let leader = eventually(Duration::from_secs(90), "a Lease holder", holder).await;
            let before = config_map_writes(&replicas);
            kubectl(
                &["-n", &ns, "apply", "--server-side", "-f", "-"],
                Some(&char_limit_policy(char_limit).to_string()),
            );
            let applied = tokio::time::Instant::now();
            eventually(Duration::from_secs(90), phase, || async {
                let cm = cms.get_opt("fleet-managed").await.ok()??;
                let text = serde_json::to_string(&cm.data).ok()?;
                text.contains(&char_limit.to_string()).then_some(())
            })
            .await;
            let took = applied.elapsed();
            // Time for a second writer, if there were one, to write too.
            tokio::time::sleep(Duration::from_secs(2)).await;
            let after = config_map_writes(&replicas);
            // Right after an outage the Lease may change hands between the read above and
            // the write (the holder's renewal failed during the outage): the write is then
            // the next holder's. Either way it is one write, by a replica that held the
            // Lease across the edit, and by nobody else.
            let then = eventually(Duration::from_secs(90), "a Lease holder", holder).await;
            let deltas: Vec<f64> = after.iter().zip(&before).map(|(x, y)| x - y).collect();
            let writer = replicas
                .iter()
                .zip(&deltas)
                .find(|(_, d)| **d == 1.0)
                .map(|((name, _), _)| name.to_string());
            let total: f64 = deltas.iter().sum();
            assert!(
                total == 1.0 && writer.as_ref().is_some_and(|w| *w == leader || *w == then),
                "{phase}: exactly one ConfigMap write, by the holder ({leader} before the edit, \
                 {then} after it); writes of replicas a, b: {deltas:?}"
            );
            let writer = writer.unwrap_or_default();
            println!(
                "{phase}: rendered by {writer} {took:?} after the apply (holder {leader}, then {then})"
            );
        }
    };

    edit(2001, "the first render").await;

    // The API server goes away for 30 s.
    let writes_before_outage = config_map_writes(&replicas);
    plane.stop("kube-apiserver").expect("stop the API server");
    tokio::time::sleep(OUTAGE).await;
    plane
        .start_again("kube-apiserver")
        .expect("start the API server again");
    let restarted = tokio::time::Instant::now();
    eventually(
        Duration::from_secs(120),
        "the API server ready again",
        || async { plane.is_ready().await.then_some(()) },
    )
    .await;
    let ready = restarted.elapsed();
    let leader = eventually(Duration::from_secs(90), "a holder after the outage", holder).await;
    println!(
        "API server down {OUTAGE:?}: ready {ready:?} after its restart, {leader} holds the Lease {:?} after it",
        restarted.elapsed()
    );
    edit(2002, "the render after the API server's outage").await;

    // etcd is killed and started again under the running API server.
    plane.stop("etcd").expect("stop etcd");
    tokio::time::sleep(Duration::from_secs(5)).await;
    plane.start_again("etcd").expect("start etcd again");
    let restarted = tokio::time::Instant::now();
    eventually(
        Duration::from_secs(120),
        "the API server ready over etcd",
        || async { plane.is_ready().await.then_some(()) },
    )
    .await;
    println!(
        "etcd restarted: API server ready {:?} after",
        restarted.elapsed()
    );
    edit(2003, "the render after etcd's restart").await;

    // Both replicas still run and exactly one leads.
    for (name, r) in &replicas {
        assert!(r.running(), "{name} must survive the outages:\n{}", r.log());
    }
    let leading: f64 = replicas
        .iter()
        .map(|(_, r)| r.metric("fleetgate_controller_leader", "").unwrap_or(0.0))
        .sum();
    assert!(
        (leading - 1.0).abs() < f64::EPSILON,
        "exactly one replica leads after the outages ({leading})"
    );

    // Three edits, three writes in all: the outages themselves wrote nothing.
    let before: f64 = writes_before_outage.iter().sum();
    let total: f64 = config_map_writes(&replicas).iter().sum();
    assert_eq!(
        (before, total),
        (1.0, 3.0),
        "one ConfigMap write per edit and none for an outage (before the outage, in all)"
    );
    let seen = versions.lock().expect("the record").clone();
    assert_eq!(
        seen.len(),
        3,
        "the ConfigMap has one resourceVersion per edit, none from an outage: {seen:?}"
    );
    let cm = cms.get("fleet-managed").await.expect("the ConfigMap");
    let managers: Vec<(String, String)> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        managers,
        vec![("fleetgate-controller".to_string(), "Apply".to_string())],
        "one field manager, the controller's server-side apply, owns the ConfigMap"
    );
    // No check of the logs for refusals here: for about a second after its restart the API
    // server's RBAC authorizer refuses requests it will allow once its caches are synced (a
    // replica's Lease read was refused once in this way); `rbac.rs` checks the Role itself.
    settled(&client).await;
}

/// Wait until kube-controller-manager has caught up after the outages, so that the next case
/// (they run one at a time on this plane) starts on a plane that works: its watches come back
/// on client-go's backoff, up to half a minute after the API server, and until then a new
/// namespace gets no `default` ServiceAccount (a case that ran next once failed on that).
async fn settled(client: &kube::Client) {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let name = "outage-settled";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let probe: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name }
    }))
    .expect("a namespace object");
    namespaces
        .create(&kube::api::PostParams::default(), &probe)
        .await
        .expect("the probe namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let started = tokio::time::Instant::now();
    eventually(
        Duration::from_secs(120),
        "kube-controller-manager creating a new namespace's default ServiceAccount after the outages",
        || {
            let accounts = accounts.clone();
            async move { accounts.get_opt("default").await.ok().flatten() }
        },
    )
    .await;
    println!(
        "kube-controller-manager caught up {:?} after the last edit",
        started.elapsed()
    );
}
