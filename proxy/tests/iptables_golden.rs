//! Golden files for `init-iptables --dry-run`: the exact rules each option set generates. Every
//! case names its name server (`--dns-servers`), so the files do not depend on this machine's
//! /etc/resolv.conf.
//! Regenerate after an intended change with
//! `FLEETGATE_UPDATE_GOLDEN=1 cargo test -p fleetgate-proxy --test iptables_golden`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stderr)]

use std::path::PathBuf;

use clap::Parser;
use fleetgate_iptables::render_dry_run;
use fleetgate_proxy::cli::{Cli, Command};

/// (golden file, arguments after `init-iptables --dry-run`).
const CASES: &[(&str, &[&str])] = &[
    ("default", &[]),
    (
        "custom_uid_port",
        &[
            "--proxy-uid",
            "2102",
            "--proxy-gid",
            "2102",
            "--to-port",
            "4140",
        ],
    ),
    (
        "ignore_ports",
        &["--ignore-ports", "22,5432", "--ignore-ports", "8000-8100"],
    ),
    (
        "ignore_cidrs",
        &[
            "--ignore-cidrs",
            "10.96.0.10/32,169.254.0.0/16,fd00:10:96::a/128,2001:db8::/32",
        ],
    ),
    ("ipv4_only", &["--no-ipv6"]),
    (
        "commands",
        &["--format", "commands", "--ignore-ports", "22"],
    ),
    ("cleanup", &["--cleanup"]),
    ("allow_udp", &["--allow-udp"]),
];

/// The name servers every case gives (kube-dns's usual addresses).
const DNS_SERVERS: &[&str] = &["--dns-servers", "10.96.0.10,fd00:10:96::a"];

fn render(args: &[&str]) -> String {
    let argv = ["fleetgate-proxy", "init-iptables", "--dry-run"]
        .iter()
        .chain(DNS_SERVERS)
        .chain(args)
        .copied();
    let cli = Cli::try_parse_from(argv).expect("the golden arguments must parse");
    let Command::InitIptables(args) = cli.command else {
        panic!("init-iptables must parse to its command");
    };
    render_dry_run(&args).expect("the golden arguments must render")
}

#[test]
fn dry_run_output_matches_the_golden_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/iptables");
    let update = std::env::var_os("FLEETGATE_UPDATE_GOLDEN").is_some();
    let mut drifted = Vec::new();
    for (name, args) in CASES {
        let path = dir.join(format!("{name}.txt"));
        let got = render(args);
        if update {
            std::fs::write(&path, &got).expect("the golden file must be writable");
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            eprintln!(
                "--- {} (expected)\n{want}\n+++ generated\n{got}",
                path.display()
            );
            drifted.push(*name);
        }
    }
    assert!(
        drifted.is_empty(),
        "iptables rules drifted from the golden files {drifted:?}; if intended, regenerate with \
         `FLEETGATE_UPDATE_GOLDEN=1 cargo test -p fleetgate-proxy --test iptables_golden` and review the diff"
    );
}

#[test]
fn every_golden_exempts_the_proxy_uid_first_and_lets_udp_out_only_as_dns() {
    for (name, args) in CASES.iter().filter(|(n, _)| *n != "cleanup") {
        let text = render(args);
        let uid = text.find("--uid-owner").expect("a uid exemption");
        let redirect = text.find("REDIRECT --to-ports").expect("a redirect");
        assert!(uid < redirect, "{name}: the uid exemption comes first");
        if args.contains(&"--allow-udp") {
            assert!(!text.contains("-p udp"), "{name}: UDP is left alone");
            continue;
        }
        // Per family (a restore section, or the commands of one binary): the UDP chain exempts
        // the uid, then DNS to the name server, and refuses every other datagram last; no UDP
        // rule outside that chain but the jump to it.
        let families: Vec<Vec<&str>> = if text.contains("*nat") {
            text.split("*nat")
                .skip(1)
                .map(|f| f.lines().collect())
                .collect()
        } else {
            ["iptables ", "ip6tables "]
                .iter()
                .map(|cmd| text.lines().filter(|l| l.starts_with(cmd)).collect())
                .collect()
        };
        let want = if args.contains(&"--no-ipv6") { 1 } else { 2 };
        assert_eq!(families.len(), want, "{name}: every family");
        for family in families {
            let chain: Vec<&str> = family
                .iter()
                .copied()
                .filter(|l| l.contains("-A FLEETGATE_UDP "))
                .collect();
            let at = |needle: &str| {
                chain
                    .iter()
                    .position(|l| l.contains(needle))
                    .unwrap_or_else(|| panic!("{name}: `{needle}` in {chain:?}"))
            };
            assert!(at("--uid-owner") < at("--dport 53 -j RETURN"), "{name}");
            assert_eq!(
                at("-p udp -j REDIRECT"),
                chain.len() - 1,
                "{name}: {chain:?}"
            );
            let elsewhere: Vec<&&str> = family
                .iter()
                .filter(|l| l.contains("-p udp") && !l.contains("FLEETGATE_UDP"))
                .collect();
            assert!(elsewhere.is_empty(), "{name}: {elsewhere:?}");
        }
    }
}
