//! The Helm chart `charts/fleetgate`, checked with the real tools from PyPI: `helm lint --strict`
//! with helm v4 and v3, `helm template` over a values matrix, every render through
//! `kubernetes-validate --strict` for two Kubernetes versions, assertions on the rendered objects
//! (restricted pods, namespaced names, webhook scope, least-privilege Role, injector schema),
//! the values schema refusing typos, the example agent, and `deploy/install.yaml` drift.

// Helpers outside `#[test]` functions fail the test on broken setup, exactly as the tests do.
#![allow(clippy::expect_used)]

#[path = "chart/objects.rs"]
mod objects;
#[path = "chart/tls.rs"]
mod tls;
#[path = "chart/tools.rs"]
mod tools;

use serde_json::Value;
use tools::{Tools, args, documents, find, render, template, text, validate, values_file};

/// The values matrix: a name and the extra `helm template` arguments.
fn matrix() -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("defaults", args(&["-f", &values_file("defaults.yaml")])),
        (
            "transparent",
            args(&["-f", &values_file("transparent.yaml")]),
        ),
        (
            "cert-manager",
            args(&["-f", &values_file("cert-manager.yaml")]),
        ),
        ("everything", args(&["-f", &values_file("everything.yaml")])),
    ]
}

/// Every render of the matrix in namespace `ns`, with its case name.
fn renders(tools: &Tools, ns: &str) -> Vec<(&'static str, Vec<Value>)> {
    matrix()
        .into_iter()
        .map(|(name, extra)| {
            (
                name,
                documents(&render(&tools.helm, "fleetgate", ns, &extra)),
            )
        })
        .collect()
}

#[test]
fn helm_lint_strict_passes_with_helm_v4_and_v3_for_every_values_case() {
    let Some(tools) = tools::tools() else { return };
    for helm in [&tools.helm, &tools.helm3] {
        for (case, extra) in matrix() {
            let mut list = args(&["lint", "--strict", "--namespace", "agents"]);
            list.push(tools::chart().display().to_string());
            list.extend(extra);
            let out = tools::run(helm, &list, None);
            assert!(
                out.status.success(),
                "{} lint --strict ({case}) must pass: {}",
                helm.display(),
                text(&out)
            );
        }
    }
}

#[test]
fn every_render_passes_kubernetes_validate_strict_on_both_versions_and_both_helms() {
    let Some(tools) = tools::tools() else { return };
    for (helm, label) in [(&tools.helm, "helm v4"), (&tools.helm3, "helm v3")] {
        // One stream per helm (the validator starts slowly); a failure names the resource.
        let mut stream = String::new();
        for ns in ["agents-a", "agents-b"] {
            for (case, extra) in matrix() {
                stream.push_str(&format!("---\n# case: {case} in {ns}\n"));
                stream.push_str(&render(helm, "fleetgate", ns, &extra));
            }
        }
        for version in tools::KUBE_VERSIONS {
            let out = validate(&tools, &stream, version);
            let said = text(&out);
            assert!(
                out.status.success() && !said.contains("ERROR"),
                "{label} renders must pass kubernetes-validate --strict -k {version}: {said}"
            );
            let checked = said
                .matches("passed for resource deployment/fleetgate-controller")
                .count();
            assert_eq!(
                checked, 8,
                "{label}: every case's Deployment must be checked on {version}: {said}"
            );
        }
    }
}

#[test]
fn the_validator_refuses_a_render_with_a_mistyped_field() {
    let Some(tools) = tools::tools() else { return };
    let yaml = render(&tools.helm, "fleetgate", "agents", &[]);
    // A control: the same stream with one wrongly typed field must fail, so a pass means something.
    let broken = yaml.replacen("runAsNonRoot: true", "runAsNonRoot: \"yes\"", 1);
    assert_ne!(broken, yaml, "the render must carry runAsNonRoot");
    let out = validate(&tools, &broken, "1.33.0");
    assert!(
        !out.status.success(),
        "kubernetes-validate must refuse runAsNonRoot: \"yes\": {}",
        text(&out)
    );
}

#[test]
fn every_pod_and_container_runs_with_the_restricted_security_context() {
    let Some(tools) = tools::tools() else { return };
    for (case, docs) in renders(&tools, "agents") {
        let pods = objects::pod_specs(&docs);
        assert!(!pods.is_empty(), "{case}: the render must hold a workload");
        for (owner, pod) in pods {
            objects::assert_restricted(&format!("{case} {owner}"), pod);
        }
    }
}

#[test]
fn cluster_scoped_objects_carry_the_namespace_and_two_releases_never_collide() {
    let Some(tools) = tools::tools() else { return };
    let a = documents(&render(&tools.helm, "fleetgate", "agents-a", &[]));
    let b = documents(&render(&tools.helm, "fleetgate", "agents-b", &[]));
    for (ns, docs) in [("agents-a", &a), ("agents-b", &b)] {
        for doc in docs.iter() {
            let kind = doc["kind"].as_str().unwrap_or_default();
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            assert!(
                !matches!(kind, "ClusterRole" | "ClusterRoleBinding"),
                "the chart must not create a {kind} ({name}) unless clusterBaseline is on"
            );
            if objects::is_cluster_scoped(kind) && kind != "CustomResourceDefinition" {
                assert!(
                    name.ends_with(ns),
                    "cluster-scoped {kind} {name} must carry the namespace {ns}"
                );
            } else if kind != "CustomResourceDefinition" {
                assert_eq!(
                    doc["metadata"]["namespace"], ns,
                    "{kind} {name} must live in the release namespace"
                );
            }
        }
    }
    let shared: Vec<String> = objects::cluster_scoped_names(&a)
        .intersection(&objects::cluster_scoped_names(&b))
        .filter(|n| !n.starts_with("CustomResourceDefinition/"))
        .cloned()
        .collect();
    assert!(
        shared.is_empty(),
        "releases in two namespaces must not share cluster-scoped objects: {shared:?}"
    );
}

#[test]
fn the_webhook_only_sees_labelled_pods_of_the_release_namespace() {
    let Some(tools) = tools::tools() else { return };
    let cases = [
        ("agents-a", "Fail", args(&[])),
        (
            "agents-b",
            "Ignore",
            args(&["--set", "webhook.failurePolicy=Ignore"]),
        ),
    ];
    for (ns, policy, extra) in cases {
        let docs = documents(&render(&tools.helm, "fleetgate", ns, &extra));
        let config = find(&docs, "MutatingWebhookConfiguration", None);
        assert_eq!(config["metadata"]["name"], format!("fleetgate-{ns}"));
        let hooks = config["webhooks"]
            .as_array()
            .expect("webhooks must be a list");
        assert_eq!(hooks.len(), 1, "one webhook must be declared");
        let hook = &hooks[0];
        let want = [
            (
                "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                Value::from(ns),
            ),
            (
                "/objectSelector/matchLabels/fleetgate.dev~1inject",
                "enabled".into(),
            ),
            (
                "/objectSelector/matchExpressions",
                serde_json::json!([{"key": "fleetgate.dev/component", "operator": "NotIn", "values": ["controller"]}]),
            ),
            ("/sideEffects", "None".into()),
            ("/failurePolicy", policy.into()),
            ("/admissionReviewVersions", serde_json::json!(["v1"])),
            ("/clientConfig/service/namespace", ns.into()),
            ("/clientConfig/service/name", "fleetgate-controller".into()),
            ("/clientConfig/service/path", "/mutate-pods".into()),
            ("/rules/0/operations", serde_json::json!(["CREATE"])),
            ("/rules/0/resources", serde_json::json!(["pods"])),
        ];
        for (pointer, value) in want {
            assert_eq!(
                hook.pointer(pointer),
                Some(&value),
                "{ns}: webhook {pointer}"
            );
        }
        objects::assert_helm_tls_matches(&docs, hook);
    }
}

#[test]
fn cert_manager_mode_issues_the_serving_certificate_and_injects_the_ca() {
    let Some(tools) = tools::tools() else { return };
    let extra = args(&["-f", &values_file("cert-manager.yaml")]);
    let docs = documents(&render(&tools.helm, "edge", "agents", &extra));
    let config = find(&docs, "MutatingWebhookConfiguration", None);
    assert_eq!(
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "agents/edge-webhook",
        "cert-manager must inject the CA of the serving Certificate"
    );
    assert!(
        config["webhooks"][0]["clientConfig"]
            .get("caBundle")
            .is_none(),
        "the chart must leave caBundle to cert-manager"
    );
    let cert = find(&docs, "Certificate", Some("edge-webhook"));
    assert_eq!(
        cert["spec"]["dnsNames"][0], "edge-controller.agents.svc",
        "the certificate must name the webhook Service"
    );
    let deployment = find(&docs, "Deployment", None);
    let mounted = objects::volume_secret(deployment, "webhook-tls");
    assert_eq!(
        cert["spec"]["secretName"], mounted,
        "the controller must mount the Secret cert-manager writes"
    );
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "Secret" && d["metadata"]["name"] == mounted),
        "the chart must not also render the TLS Secret in cert-manager mode"
    );
}

#[test]
fn rbac_is_a_namespaced_role_with_least_privilege() {
    let Some(tools) = tools::tools() else { return };
    let docs = documents(&render(&tools.helm, "fleetgate", "agents", &[]));
    let role = find(&docs, "Role", Some("fleetgate-controller"));
    let got = objects::rule_set(role);
    let want = objects::expected_rules("fleetgate-report-token", "fleetgate-controller");
    assert_eq!(
        got, want,
        "the Role must grant exactly the controller's needs"
    );
    let single = documents(&render(
        &tools.helm,
        "fleetgate",
        "agents",
        &args(&[
            "--set",
            "controller.replicas=1",
            "--set",
            "controller.leaderElection.enabled=false",
        ]),
    ));
    let unelected = objects::rule_set(find(&single, "Role", Some("fleetgate-controller")));
    assert!(
        unelected.iter().all(|r| !r.contains("leases")),
        "without election the Role must not touch leases: {unelected:?}"
    );
    let binding = find(&docs, "RoleBinding", Some("fleetgate-controller"));
    let deployment = find(&docs, "Deployment", None);
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(
        binding["subjects"][0]["name"],
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "the RoleBinding must bind the controller's ServiceAccount"
    );
    assert_eq!(binding["subjects"][0]["namespace"], "agents");
}

#[test]
fn the_values_schema_refuses_typos_and_out_of_range_values_with_both_helms() {
    let Some(tools) = tools::tools() else { return };
    let cases = [
        ("webhook.failurPolicy=Fail", "failurPolicy"),
        ("webhook.failurePolicy=Never", "failurePolicy"),
        ("controler.logLevel=debug", "controler"),
        ("injector.proxyUid=0", "proxyUid"),
        ("injector.hermesHome=/data", "hermesHome"),
        ("webhook.timeoutSeconds=60", "timeoutSeconds"),
        ("controller.replicas=0", "replicas"),
        (
            "controller.leaderElection.leaseDurationSeconds=1",
            "leaseDurationSeconds",
        ),
        ("admissionPolicy.enable=true", "enable"),
        ("injector.ignoreOutboundPorts={ssh}", "ignoreOutboundPorts"),
        (
            "injector.ignoreOutboundPorts={70000}",
            "ignoreOutboundPorts",
        ),
    ];
    for helm in [&tools.helm, &tools.helm3] {
        for (set, key) in cases {
            let out = template(helm, "fleetgate", "agents", &args(&["--set", set]));
            let said = text(&out);
            assert!(
                !out.status.success() && said.contains(key),
                "{} must refuse --set {set} naming `{key}`: {said}",
                helm.display()
            );
        }
        let old = template(
            helm,
            "fleetgate",
            "agents",
            &args(&["--kube-version", "1.29.0"]),
        );
        assert!(
            !old.status.success() && text(&old).contains("kubeVersion"),
            "Chart.yaml kubeVersion must refuse Kubernetes 1.29: {}",
            text(&old)
        );
        let ok = template(
            helm,
            "fleetgate",
            "agents",
            &args(&[
                "--set",
                "webhook.failurePolicy=Ignore",
                "--set-json",
                r#"injector.ignoreOutboundPorts=[22,"8000-8100"]"#,
            ]),
        );
        assert!(
            ok.status.success(),
            "a correct value must pass: {}",
            text(&ok)
        );
    }
}

#[test]
fn the_injector_config_has_exactly_the_agreed_keys_and_matches_the_controller() {
    let Some(tools) = tools::tools() else { return };
    let extra = args(&[
        "-f",
        &values_file("transparent.yaml"),
        "--set",
        "image.proxy.tag=9.9.9",
    ]);
    let docs = documents(&render(&tools.helm, "team", "agents", &extra));
    let injector = objects::injector_config(&docs, "team-injector");
    let want = serde_json::json!({
        "proxyImage": "ghcr.io/fleetgate/fleetgate-proxy:9.9.9",
        "proxyImagePullPolicy": "IfNotPresent",
        "proxyUid": 15000,
        "proxyResources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "cacheClaimName": "fleetgate-cache",
        "hermesHomePath": "/opt/data",
        "agentContainer": null,
        "reportTokenSecret": "team-report-token",
        "ignoreOutboundPorts": [5432],
        "ignoreOutboundCIDRs": ["10.96.0.10/32"],
    });
    assert_eq!(
        injector, want,
        "injector.yaml must hold exactly the agreed schema"
    );
    let secret = find(&docs, "Secret", Some("team-report-token"));
    assert!(
        secret["data"]["token"]
            .as_str()
            .is_some_and(|t| t.len() >= 48),
        "the report token Secret must carry a random `token`"
    );
    let policy = find(&docs, "FleetPolicy", Some("fleet"));
    assert_eq!(policy["spec"]["egress"]["mode"], "transparent");
    assert_eq!(policy["metadata"]["namespace"], "agents");
}

#[test]
fn the_controller_runs_two_elected_replicas_that_roll_one_at_a_time() {
    let Some(tools) = tools::tools() else { return };
    let docs = documents(&render(&tools.helm, "team", "agents", &[]));
    let deployment = find(&docs, "Deployment", Some("team-controller"));
    assert_eq!(deployment["spec"]["replicas"], 2, "two replicas by default");
    assert_eq!(
        deployment["spec"]["strategy"],
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}),
        "a serving replica is never removed before its successor is ready"
    );
    let pod = &deployment["spec"]["template"];
    assert_eq!(
        pod["metadata"]["labels"]["fleetgate.dev/component"], "controller",
        "the label the webhook's objectSelector excludes"
    );
    assert_eq!(
        pod["spec"]["topologySpreadConstraints"][0]["topologyKey"],
        "kubernetes.io/hostname"
    );
    assert_eq!(
        pod["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"], "ScheduleAnyway",
        "a one-node cluster must still schedule both replicas"
    );
    assert_eq!(
        pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            [0]["podAffinityTerm"]["topologyKey"],
        "kubernetes.io/hostname"
    );
    let pdb = find(&docs, "PodDisruptionBudget", Some("team-controller"));
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"],
        "the PodDisruptionBudget must select the controller pods"
    );
    let webhook = find(&docs, "MutatingWebhookConfiguration", None);
    assert_eq!(webhook["webhooks"][0]["failurePolicy"], "Fail");

    // One replica: no PodDisruptionBudget (it would block every drain); more replicas without
    // election, or a grace not below the duration, or an injection label on the controller
    // itself, are refused at render time.
    let one = documents(&render(
        &tools.helm,
        "team",
        "agents",
        &args(&["--set", "controller.replicas=1"]),
    ));
    assert!(
        !one.iter().any(|d| d["kind"] == "PodDisruptionBudget"),
        "one replica must not get a PodDisruptionBudget"
    );
    for (sets, said) in [
        (
            vec!["controller.leaderElection.enabled=false"],
            "needs controller.leaderElection.enabled",
        ),
        (
            vec!["controller.leaderElection.graceSeconds=15"],
            "graceSeconds must be below",
        ),
        (
            vec!["controller.podLabels.fleetgate\\.dev/inject=enabled"],
            "must not carry fleetgate.dev/inject",
        ),
    ] {
        let mut extra = Vec::new();
        for set in sets {
            extra.extend(args(&["--set", set]));
        }
        let out = template(&tools.helm, "team", "agents", &extra);
        assert!(
            !out.status.success() && text(&out).contains(said),
            "{extra:?} must be refused with `{said}`: {}",
            text(&out)
        );
    }
}

#[test]
fn the_admission_policy_and_its_binding_cover_the_release_namespace_only() {
    let Some(tools) = tools::tools() else { return };
    let docs = documents(&render(&tools.helm, "team", "agents", &[]));
    let policy = find(
        &docs,
        "ValidatingAdmissionPolicy",
        Some("fleetgate-injected-agents"),
    );
    assert_eq!(policy["spec"]["failurePolicy"], "Fail");
    assert_eq!(
        policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"],
        serde_json::json!(["pods", "pods/ephemeralcontainers"])
    );
    assert_eq!(
        policy["spec"]["validations"].as_array().map(Vec::len),
        Some(12),
        "gate present, no hostNetwork, and one per rule of the identity table"
    );
    let variables: Vec<&str> = policy["spec"]["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(
        variables,
        [
            "captured",
            "netCaps",
            "privileged",
            "ptrace",
            "hostPid",
            "gateUid",
            "unsetUid",
            "gateGid",
            "rootKeepsSetuid",
            "rootEscalates",
            "initNotFirst"
        ],
        "the capture, then the offending fields of each rule"
    );
    let binding = find(
        &docs,
        "ValidatingAdmissionPolicyBinding",
        Some("fleetgate-injected-agents"),
    );
    assert_eq!(binding["spec"]["policyName"], "fleetgate-injected-agents");
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
    assert_eq!(
        binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "agents"
    );
    let off = documents(&render(
        &tools.helm,
        "team",
        "agents",
        &args(&["--set", "admissionPolicy.enabled=false"]),
    ));
    assert!(
        !off.iter().any(|d| d["kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))),
        "admissionPolicy.enabled=false must render neither"
    );
}

#[test]
fn the_controller_runs_with_the_documented_arguments() {
    let Some(tools) = tools::tools() else { return };
    let docs = documents(&render(&tools.helm, "team", "agents", &[]));
    let deployment = find(&docs, "Deployment", Some("team-controller"));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let want = args(&[
        "run",
        "--namespace",
        "$(POD_NAMESPACE)",
        "--admin-addr",
        "0.0.0.0:8080",
        "--webhook-addr",
        "0.0.0.0:9443",
        "--webhook-cert",
        "/tls/tls.crt",
        "--webhook-key",
        "/tls/tls.key",
        "--injector-config",
        "/etc/fleetgate-controller/injector.yaml",
        "--report-token-secret",
        "team-report-token",
        "--scrape-timeout-ms",
        "5000",
        "--scrape-concurrency",
        "8",
        "--leader-elect=true",
        "--cluster-baseline=false",
        "--lease-name",
        "team-controller",
        "--lease-duration-seconds",
        "15",
        "--lease-grace-seconds",
        "5",
    ]);
    assert_eq!(
        container["args"],
        serde_json::json!(want),
        "controller arguments"
    );
    for (var, path) in [
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_NAME", "metadata.name"),
    ] {
        let env = container["env"]
            .as_array()
            .and_then(|e| e.iter().find(|v| v["name"] == var))
            .unwrap_or_else(|| panic!("{var} must be set"));
        assert_eq!(
            env["valueFrom"]["fieldRef"]["fieldPath"], path,
            "{var} from the downward API"
        );
    }
    objects::assert_mounts(deployment);
}

#[test]
fn the_example_agent_is_labelled_for_injection_and_validates() {
    let Some(tools) = tools::tools() else { return };
    let path = tools::workspace().join("deploy/examples/agent-deployment.yaml");
    let yaml = std::fs::read_to_string(&path).expect("the example agent must exist");
    for version in tools::KUBE_VERSIONS {
        let out = validate(&tools, &yaml, version);
        assert!(
            out.status.success(),
            "the example agent must validate on {version}: {}",
            text(&out)
        );
    }
    let docs = documents(&yaml);
    let deployment = find(&docs, "Deployment", Some("hermes"));
    let template = &deployment["spec"]["template"];
    assert_eq!(
        template["metadata"]["labels"]["fleetgate.dev/inject"],
        "enabled"
    );
    let defaults = documents(
        &std::fs::read_to_string(tools::chart().join("values.yaml")).expect("values.yaml"),
    );
    let home = &defaults[0]["injector"]["hermesHomePath"];
    let mounted = template["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .is_some_and(|m| m.iter().any(|v| &v["mountPath"] == home));
    assert!(
        mounted,
        "the agent must mount its Hermes home at the injector's hermesHomePath {home}"
    );
}

#[test]
fn deploy_install_yaml_is_the_chart_rendered_with_the_documented_inputs() {
    let Some(tools) = tools::tools() else { return };
    let path = tools::workspace().join("deploy/install.yaml");
    let rendered = render(
        &tools.helm,
        "fleetgate",
        "fleetgate",
        &args(objects::INSTALL_ARGS),
    );
    let want = format!("{}{rendered}", objects::INSTALL_HEADER);
    if std::env::var_os("FLEETGATE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &want).expect("deploy/install.yaml must be writable");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    for version in tools::KUBE_VERSIONS {
        let out = validate(&tools, &committed, version);
        assert!(
            out.status.success(),
            "deploy/install.yaml must validate on {version}: {}",
            text(&out)
        );
    }
    assert!(
        committed == want,
        "deploy/install.yaml drifted from charts/fleetgate; regenerate it with:\n  FLEETGATE_BLESS=1 cargo test -p fleetgate-e2e --test chart"
    );
}

#[test]
fn the_notes_tell_the_user_what_to_do_next() {
    let Some(tools) = tools::tools() else { return };
    let cases = [
        (
            args(&["--set", "webhook.failurePolicy=Ignore"]),
            "kubectl -n agents apply -f",
            "start WITHOUT the gate (the ValidatingAdmissionPolicy fleetgate-injected-agents still refuses them)",
        ),
        (
            args(&["--set", "defaultPolicy.enabled=true"]),
            "kubectl -n agents get fleetpolicy fleet",
            "helm -n agents rollback fleetgate",
        ),
    ];
    for (extra, policy_step, failure_note) in cases {
        let mut list = args(&[
            "install",
            "fleetgate",
            "--namespace",
            "agents",
            "--dry-run=client",
        ]);
        list.insert(2, tools::chart().display().to_string());
        list.extend(extra.iter().cloned());
        let out = tools::run(&tools.helm, &list, None);
        let said = text(&out);
        assert!(
            out.status.success(),
            "helm install --dry-run must succeed: {said}"
        );
        let notes = said
            .split("NOTES:")
            .nth(1)
            .expect("helm must print the NOTES");
        for want in [
            policy_step,
            "fleetgate.dev/inject: enabled",
            "kubectl -n agents get fp",
            "kubectl -n agents edit fp",
            failure_note,
        ] {
            assert!(
                notes.contains(want),
                "{extra:?}: the NOTES must say `{want}`: {notes}"
            );
        }
    }
}

#[tokio::test]
async fn the_helm_generated_certificate_serves_the_webhook_service_name_to_a_client_trusting_the_ca_bundle()
 {
    let Some(tools) = tools::tools() else { return };
    let docs = documents(&render(&tools.helm, "fleetgate", "agents", &[]));
    let secret = find(&docs, "Secret", Some("fleetgate-webhook-tls"));
    let pem = |key: &str| {
        let data = secret["data"][key]
            .as_str()
            .expect("the TLS Secret must carry the key");
        tls::b64decode(data).expect("Secret data must be base64")
    };
    let (ca, crt, key) = (pem("ca.crt"), pem("tls.crt"), pem("tls.key"));
    let cases = [
        ("fleetgate-controller.agents.svc", true),
        ("fleetgate-controller.agents.svc.cluster.local", true),
        ("fleetgate-controller.other.svc", false),
    ];
    for (name, accepted) in cases {
        let result = tls::handshake(&ca, &crt, &key, name).await;
        assert_eq!(
            result.is_ok(),
            accepted,
            "a client trusting the caBundle asking for {name}: {result:?}"
        );
    }
}

#[test]
fn with_the_cluster_baseline_on_a_release_only_binds_its_controller_to_the_reader_role() {
    let Some(tools) = tools::tools() else { return };
    let on = args(&["--set", "clusterBaseline.enabled=true"]);
    let a = documents(&render(&tools.helm, "fleetgate", "agents-a", &on));
    let b = documents(&render(&tools.helm, "fleetgate", "agents-b", &on));
    for (ns, docs) in [("agents-a", &a), ("agents-b", &b)] {
        assert!(
            docs.iter().all(|d| d["kind"] != "ClusterRole"),
            "the ClusterRole belongs to the cluster part"
        );
        let binding = find(docs, "ClusterRoleBinding", None);
        assert_eq!(
            binding["metadata"]["name"],
            format!("fleetgate-baseline-reader-{ns}")
        );
        assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
        assert_eq!(binding["roleRef"]["name"], "fleetgate-baseline-reader");
        let deployment = find(docs, "Deployment", None);
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "namespace": ns,
                "name": deployment["spec"]["template"]["spec"]["serviceAccountName"]}]),
            "only this release's controller is bound"
        );
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert!(
            container["args"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "--cluster-baseline=true")),
            "the controller reads the baselines"
        );
    }
    let shared: Vec<String> = objects::cluster_scoped_names(&a)
        .intersection(&objects::cluster_scoped_names(&b))
        .filter(|n| !n.starts_with("CustomResourceDefinition/"))
        .cloned()
        .collect();
    assert!(
        shared.is_empty(),
        "no shared cluster-scoped object: {shared:?}"
    );
    let crds = tools::workspace().join("charts/fleetgate/crds/clusterfleetpolicy.yaml");
    assert!(
        crds.exists(),
        "the namespace chart carries the CRD it watches"
    );
}

#[test]
fn the_cluster_part_grants_read_only_access_to_baselines_and_renders_its_default() {
    let Some(tools) = tools::tools() else { return };
    let chart = tools::workspace().join("charts/fleetgate-baseline");
    let mut list = args(&["template", "baseline"]);
    list.push(chart.display().to_string());
    let out = tools::run(&tools.helm, &list, None);
    assert!(
        out.status.success(),
        "helm template must pass: {}",
        text(&out)
    );
    let docs = documents(&String::from_utf8_lossy(&out.stdout));
    let role = find(&docs, "ClusterRole", Some("fleetgate-baseline-reader"));
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": ["fleetgate.dev"], "resources": ["clusterfleetpolicies"],
            "verbs": ["list", "watch"]}]),
        "the reader role grants listing and watching baselines and nothing else"
    );
    let baseline = find(&docs, "ClusterFleetPolicy", Some("platform"));
    assert_eq!(baseline["spec"]["egress"]["minimumMode"], "proxy");
    let parsed: fleetgate_controller::crd::cluster_fleet_policy::ClusterFleetPolicy =
        serde_json::from_value(baseline.clone()).expect("the default baseline must parse");
    assert!(
        parsed.metadata.namespace.is_none(),
        "a baseline is cluster-scoped"
    );
    let rbac: String = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole")
        .map(|d| format!("---\n{}", serde_yaml::to_string(d).expect("yaml")))
        .collect();
    for version in tools::KUBE_VERSIONS {
        let out = validate(&tools, &rbac, version);
        assert!(
            out.status.success(),
            "the ClusterRole must validate on {version}: {}",
            text(&out)
        );
    }
    for helm in [&tools.helm, &tools.helm3] {
        let mut list = args(&["lint", "--strict"]);
        list.push(chart.display().to_string());
        let out = tools::run(helm, &list, None);
        assert!(
            out.status.success(),
            "{} lint --strict must pass: {}",
            helm.display(),
            text(&out)
        );
        let mut off = args(&["template", "baseline"]);
        off.push(chart.display().to_string());
        off.extend(args(&[
            "--set",
            "baseline.enabled=false",
            "--set",
            "baseline.nmae=x",
        ]));
        let out = tools::run(helm, &off, None);
        assert!(
            !out.status.success(),
            "the values schema must refuse a typo"
        );
    }
}
