//! Rule semantics (order, exemptions, families) and the idempotent apply/cleanup scripts.

use super::*;

fn cfg() -> Config {
    Config::default()
}

fn position(rules: &Rules, needle: &str) -> usize {
    rules
        .rules
        .iter()
        .position(|r| r.args.join(" ").contains(needle))
        .unwrap_or_else(|| panic!("a rule with `{needle}` must exist"))
}

#[test]
fn exemptions_come_before_the_redirect_and_the_redirect_targets_the_listener() {
    let rules = Rules::build(&cfg(), Family::V4);
    let uid = position(&rules, "--uid-owner 15000 -j RETURN");
    let lo = position(&rules, "-o lo -j RETURN");
    let to_chain = position(&rules, "-j FLEETGATE_REDIRECT");
    assert!(
        uid < lo && lo < to_chain,
        "uid, then loopback, then the redirect"
    );
    let redirect = &rules.rules[position(&rules, "REDIRECT --to-ports")];
    assert_eq!(redirect.chain, REDIRECT_CHAIN);
    assert!(
        redirect
            .args
            .join(" ")
            .starts_with("-p tcp -j REDIRECT --to-ports 15182"),
        "only TCP is redirected, to 15182: {:?}",
        redirect.args
    );
    assert_eq!(rules.jumps[0].chain, "OUTPUT");
    assert!(
        rules.jumps[0]
            .args
            .join(" ")
            .contains("-p tcp -j FLEETGATE_OUTPUT")
    );
}

fn udp_rules(rules: &Rules) -> Vec<String> {
    rules
        .rules
        .iter()
        .filter(|r| r.chain == UDP_CHAIN)
        .map(|r| r.args.join(" "))
        .collect()
}

#[test]
fn udp_goes_out_only_as_dns_to_the_name_servers_and_the_rest_is_refused() {
    let c = Config {
        udp_dns_only: Some(vec![
            "10.96.0.10".parse().unwrap(),
            "fd00::a".parse().unwrap(),
        ]),
        ignore_cidrs: vec!["192.0.2.0/24".parse().unwrap()],
        ..cfg()
    };
    let v4 = Rules::build(&c, Family::V4);
    let udp = udp_rules(&v4);
    let at = |needle: &str| {
        udp.iter()
            .position(|r| r.contains(needle))
            .unwrap_or_else(|| panic!("`{needle}` in {udp:?}"))
    };
    assert!(at("--uid-owner 15000 -j RETURN") < at("-o lo -j RETURN"));
    assert!(at("-o lo") < at("-d 10.96.0.10/32 -p udp --dport 53 -j RETURN"));
    assert!(at("--dport 53") < at("-d 192.0.2.0/24 -j RETURN"));
    assert_eq!(
        at("-p udp -j REDIRECT --to-ports 15182"),
        udp.len() - 1,
        "the refusal is last: {udp:?}"
    );
    assert!(!udp.iter().any(|r| r.contains("fd00::a")), "{udp:?}");
    assert!(
        v4.jumps
            .iter()
            .any(|j| j.args.join(" ").starts_with("-p udp -j FLEETGATE_UDP")),
        "{:?}",
        v4.jumps
    );
    let v6 = udp_rules(&Rules::build(&c, Family::V6));
    assert!(
        v6.iter()
            .any(|r| r.contains("-d fd00::a/128 -p udp --dport 53")),
        "{v6:?}"
    );
    // No name server known: no DNS over UDP either, the refusal stays.
    let none = udp_rules(&Rules::build(&cfg(), Family::V4));
    assert!(!none.iter().any(|r| r.contains("--dport 53")), "{none:?}");
    assert!(
        none.last().is_some_and(|r| r.contains("REDIRECT")),
        "{none:?}"
    );
    // --allow-udp: no UDP chain, no UDP jump.
    let open = Rules::build(
        &Config {
            udp_dns_only: None,
            ..cfg()
        },
        Family::V4,
    );
    assert!(udp_rules(&open).is_empty() && open.jumps.len() == 1);
    assert!(!open.chains.contains(&UDP_CHAIN));
}

#[test]
fn allowing_udp_on_a_rerun_removes_the_udp_chain_and_its_jump() {
    let saved = Rules::build(&cfg(), Family::V4).as_saved();
    let open = Rules::build(
        &Config {
            udp_dns_only: None,
            ..cfg()
        },
        Family::V4,
    );
    let script = open.restore_script(&saved);
    let at = |needle: &str| {
        script
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in {script}"))
    };
    assert!(at("-D OUTPUT -p udp") < at("-F FLEETGATE_UDP"));
    assert!(at("-F FLEETGATE_UDP") < at("-X FLEETGATE_UDP"));
    assert!(!script.contains(":FLEETGATE_UDP"), "{script}");
    assert!(
        !script.contains("-I OUTPUT"),
        "the TCP jump is kept: {script}"
    );
}

#[test]
fn name_servers_are_read_from_resolv_conf() {
    let text = "# generated\nsearch agents.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\n\
                nameserver fe80::1%eth0\nnameserver bogus\noptions ndots:5\n";
    let got: Vec<String> = name_servers(text).iter().map(ToString::to_string).collect();
    assert_eq!(got, ["10.96.0.10", "fe80::1"]);
}

#[test]
fn custom_uid_gid_and_port_are_used() {
    let custom = Config {
        proxy_uid: 2102,
        proxy_gid: Some(2103),
        to_port: 4140,
        ..cfg()
    };
    let text = Rules::build(&custom, Family::V4).restore_script("");
    assert!(text.contains("--uid-owner 2102 -j RETURN"), "{text}");
    assert!(text.contains("--gid-owner 2103 -j RETURN"), "{text}");
    assert!(text.contains("--to-ports 4140"), "{text}");
    assert!(
        !text.contains("15000") && !text.contains("15182"),
        "no default leaks: {text}"
    );
}

#[test]
fn ignored_ports_are_grouped_fifteen_slots_per_rule() {
    let mut ports: Vec<PortRange> = (1..=20).map(|p| PortRange { first: p, last: p }).collect();
    ports.push(PortRange {
        first: 8000,
        last: 8100,
    });
    let rules = Rules::build(
        &Config {
            ignore_ports: ports,
            ..cfg()
        },
        Family::V4,
    );
    let groups: Vec<String> = rules
        .rules
        .iter()
        .filter(|r| r.args.contains(&"--dports".to_string()))
        .map(|r| r.args[r.args.iter().position(|a| a == "--dports").unwrap() + 1].clone())
        .collect();
    assert_eq!(
        groups.len(),
        2,
        "21 entries (one range) need two rules: {groups:?}"
    );
    assert_eq!(groups[0].split(',').count(), 15);
    assert_eq!(groups[1], "16,17,18,19,20,8000:8100");
}

#[test]
fn each_family_gets_only_its_own_ignored_networks() {
    let nets: Vec<IpNet> = ["10.0.0.0/8", "fd00::/8", "192.0.2.7/32"]
        .iter()
        .map(|n| n.parse().unwrap())
        .collect();
    let c = Config {
        ignore_cidrs: nets,
        ..cfg()
    };
    let v4 = Rules::build(&c, Family::V4).restore_script("");
    let v6 = Rules::build(&c, Family::V6).restore_script("");
    assert!(
        v4.contains("-d 10.0.0.0/8 ") && v4.contains("-d 192.0.2.7/32 "),
        "{v4}"
    );
    assert!(
        !v4.contains("fd00::/8"),
        "IPv6 nets must not reach iptables: {v4}"
    );
    assert!(
        v6.contains("-d fd00::/8 ") && !v6.contains("10.0.0.0/8"),
        "{v6}"
    );
}

#[test]
fn reapplying_keeps_one_jump() {
    let rules = Rules::build(&cfg(), Family::V4);
    let fresh = rules.restore_script("");
    assert!(
        fresh.contains("\n-I OUTPUT 1 -p tcp ") && fresh.contains("\n-I OUTPUT 1 -p udp "),
        "a fresh install inserts the jumps: {fresh}"
    );
    let saved = rules.as_saved();
    let again = rules.restore_script(&saved);
    assert!(
        !again.contains("-I OUTPUT"),
        "an installed jump must not be added again: {again}"
    );
    assert!(
        !again.contains("-D OUTPUT"),
        "a single jump must be kept: {again}"
    );
    assert!(
        again.contains(":FLEETGATE_OUTPUT - [0:0]"),
        "the chains are flushed and refilled"
    );
    let doubled = format!(
        "{saved}-A OUTPUT -p tcp -m comment --comment \"fleetgate/capture-outbound-tcp\" -j FLEETGATE_OUTPUT\n"
    );
    let dedupe = rules.restore_script(&doubled);
    assert_eq!(
        dedupe.matches("-D OUTPUT").count(),
        1,
        "extra jumps are deleted: {dedupe}"
    );
}

#[test]
fn cleanup_deletes_jumps_then_flushes_then_deletes_chains() {
    assert_eq!(
        cleanup_script(Family::V4, ""),
        None,
        "nothing installed, nothing to do"
    );
    let unrelated = "*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j OTHER\nCOMMIT\n";
    assert_eq!(
        cleanup_script(Family::V4, unrelated),
        None,
        "other rules are left alone"
    );
    let saved = Rules::build(&cfg(), Family::V6).as_saved();
    let script = cleanup_script(Family::V6, &saved).expect("installed rules must be removed");
    let at = |needle: &str| {
        script
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in {script}"))
    };
    assert!(at("-D OUTPUT -p tcp") < at("-F FLEETGATE_OUTPUT"));
    assert!(at("-D OUTPUT -p udp") < at("-F FLEETGATE_UDP"));
    assert!(at("-F FLEETGATE_REDIRECT") < at("-X FLEETGATE_OUTPUT"));
    assert!(at("-F FLEETGATE_UDP") < at("-X FLEETGATE_UDP"));
    assert!(script.trim_end().ends_with("COMMIT"), "{script}");
}

#[test]
fn port_ranges_parse_and_bad_ones_are_refused() {
    let ok = [
        ("80", (80, 80)),
        ("8000-8100", (8000, 8100)),
        ("8000:8100", (8000, 8100)),
    ];
    for (text, (first, last)) in ok {
        assert_eq!(
            text.parse::<PortRange>(),
            Ok(PortRange { first, last }),
            "{text}"
        );
    }
    for bad in ["0", "70000", "90-80", "x", ""] {
        assert!(bad.parse::<PortRange>().is_err(), "`{bad}` must be refused");
    }
}

#[test]
fn uid_zero_is_refused() {
    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        args: Args,
    }
    let args = <Command as clap::Parser>::try_parse_from([
        "init-iptables",
        "--proxy-uid",
        "0",
        "--dry-run",
    ])
    .expect("the arguments must parse")
    .args;
    assert!(
        matches!(render_dry_run(&args), Err(IptablesError::Invalid(_))),
        "exempting root would exempt everything"
    );
}
