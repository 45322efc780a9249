use super::*;
use crate::judge::gates::DenyReason;

/// The line as `check-url` rendered it through a `serde_json::Value` before the output was
/// buffered: the reference the streamed line must match byte for byte.
fn value_line(check: &UrlCheck) -> String {
    let value = match &check.refusal {
        None => json!({"url": check.url, "verdict": "allow", "scope": null, "code": null,
                       "message": null, "addresses": check.addresses}),
        Some(r) => {
            let scope = if r.ends_call() { "call" } else { "item" };
            json!({"url": check.url, "verdict": "deny", "scope": scope, "code": r.code(),
                   "message": r.message(), "addresses": check.addresses})
        }
    };
    format!("{value}\n")
}

#[test]
fn check_url_lines_are_the_json_objects_check_url_has_always_printed() {
    let cases = [
        UrlCheck {
            url: "https://93.184.1.1/a?q=\"quoted\"\u{e9}".into(),
            refusal: None,
            addresses: vec!["93.184.1.1".parse().expect("an address")],
        },
        UrlCheck {
            url: "http://10.0.0.1/".into(),
            refusal: Some(DenyReason::Address(
                crate::judge::gates::ip_guard::AddrRefusal::PrivateAddress {
                    addr: "10.0.0.1".parse().expect("an address"),
                    class: "private",
                },
            )),
            addresses: Vec::new(),
        },
        UrlCheck {
            url: "https://two.example/\u{2028}\t".into(),
            refusal: None,
            addresses: vec![
                "93.184.1.1".parse().expect("an address"),
                "2606:4700::6810:85e5".parse().expect("an address"),
                "::ffff:1.2.3.4".parse().expect("an address"),
            ],
        },
        UrlCheck {
            url: "https://x.example/?to\"ken\u{e9}=abc".into(),
            refusal: Some(DenyReason::SensitiveQueryParam {
                key: "to\"ken\u{e9}\\".into(),
            }),
            addresses: Vec::new(),
        },
        UrlCheck {
            url: "https://x.example/?token=abc".into(),
            refusal: Some(DenyReason::SensitiveQueryParam {
                key: "token".into(),
            }),
            addresses: Vec::new(),
        },
    ];
    for check in &cases {
        let mut out = Vec::new();
        let mut scratch = String::from("left over from the line before");
        write_check_line(&mut out, check, &mut scratch);
        assert_eq!(
            String::from_utf8(out).expect("the line must be UTF-8"),
            value_line(check),
            "the line of {} must not change",
            check.url
        );
    }
}

#[test]
fn serve_takes_its_worker_count_and_refuses_zero() {
    let parsed = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
    let workers = |cli: Cli| match cli.command {
        Command::Serve(args) => args.workers.map(std::num::NonZeroUsize::get),
        other => panic!("serve must parse as serve: {other:?}"),
    };
    let one = parsed(&["fleetgate-proxy", "serve", "--workers", "1"]).expect("--workers 1");
    assert_eq!(workers(one), Some(1));
    let unset = parsed(&["fleetgate-proxy", "serve"]).expect("no --workers");
    if std::env::var_os("FLEETGATE_WORKERS").is_none() {
        assert_eq!(
            workers(unset),
            None,
            "no flag and no env: the default applies"
        );
    }
    let zero = parsed(&["fleetgate-proxy", "serve", "--workers", "0"])
        .expect_err("zero workers must be refused");
    assert!(
        zero.to_string().contains("--workers"),
        "the error must name the flag: {zero}"
    );
    let default = crate::app::default_workers().get();
    assert!(
        (1..=crate::app::DEFAULT_WORKERS_MAX.get()).contains(&default),
        "the default is at most {} workers: {default}",
        crate::app::DEFAULT_WORKERS_MAX
    );
}

#[test]
fn serve_runs_on_a_single_threaded_runtime_and_the_other_commands_on_a_worker_per_core() {
    let flavor = |serving: bool| {
        let rt = async_runtime(serving).expect("a runtime");
        let handle = rt.handle().clone();
        (handle.runtime_flavor(), rt.metrics().num_workers())
    };
    assert_eq!(
        flavor(true),
        (tokio::runtime::RuntimeFlavor::CurrentThread, 1)
    );
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    assert_eq!(
        flavor(false),
        (tokio::runtime::RuntimeFlavor::MultiThread, cores)
    );
}
