//! The stub DNS server answers a real resolver (hickory, caching off) as scripted.

use std::net::IpAddr;
use std::time::Duration;

use fleetgate_e2e::dns::{DnsReply, StubDns};
use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::NetError;
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::{Resolver, TokioResolver};
use tokio::time::Instant;

/// What a lookup came to, in terms a table can state.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Addrs(Vec<IpAddr>),
    NxDomain,
    /// NOERROR without records of the asked type.
    NoData,
    /// Any other error, by the resolver's stable metrics label.
    Failed(&'static str),
}

/// Which addresses a lookup asks for.
#[derive(Clone, Copy, Debug)]
enum Ask {
    A,
    Aaaa,
    /// Both families at once, as the gate's resolver does (one A and one AAAA query).
    Both,
}

#[derive(Clone, Copy, Debug)]
enum Transport {
    UdpAndTcp,
    UdpOnly,
    TcpOnly,
}

fn resolver(dns: &StubDns, transport: Transport, timeout: Duration) -> TokioResolver {
    let mut server = match transport {
        Transport::UdpAndTcp => NameServerConfig::udp_and_tcp(dns.addr().ip()),
        Transport::UdpOnly => NameServerConfig::udp(dns.addr().ip()),
        Transport::TcpOnly => NameServerConfig::tcp(dns.addr().ip()),
    };
    for connection in &mut server.connections {
        connection.port = dns.addr().port();
    }
    let mut options = ResolverOpts::default();
    options.cache_size = 0;
    options.timeout = timeout;
    // `attempts` counts retries after the first send: 0 means exactly one query per lookup.
    options.attempts = 0;
    options.use_hosts_file = ResolveHosts::Never;
    options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    let config = ResolverConfig::from_name_servers(vec![server]);
    Resolver::builder_with_config(config, TokioRuntimeProvider::default())
        .with_options(options)
        .build()
        .expect("the resolver config must be valid")
}

fn outcome(result: Result<Vec<IpAddr>, NetError>) -> Outcome {
    match result {
        Ok(addrs) => Outcome::Addrs(addrs),
        Err(error) if error.is_nx_domain() => Outcome::NxDomain,
        Err(error) if error.is_no_records_found() => Outcome::NoData,
        Err(error) => Outcome::Failed(error.as_metrics_label()),
    }
}

async fn lookup(resolver: &TokioResolver, name: &str, ask: Ask) -> Outcome {
    let result = match ask {
        Ask::A => resolver.ipv4_lookup(name).await.map(|found| {
            found
                .answers()
                .iter()
                .filter_map(|r| r.data.ip_addr())
                .collect()
        }),
        Ask::Aaaa => resolver.ipv6_lookup(name).await.map(|found| {
            found
                .answers()
                .iter()
                .filter_map(|r| r.data.ip_addr())
                .collect()
        }),
        Ask::Both => resolver
            .lookup_ip(name)
            .await
            .map(|found| found.iter().collect()),
    };
    outcome(result)
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("test addresses must parse")
}

#[tokio::test]
async fn the_stub_answers_each_scripted_reply_as_a_real_resolver_expects() {
    let mixed = vec![ip("203.0.113.7"), ip("198.51.100.9"), ip("2001:db8::7")];
    let dns = StubDns::builder()
        .name("mixed.test", [DnsReply::Answer(mixed)])
        .answer("v4only.test", [ip("203.0.113.8")])
        .name("gone.test", [DnsReply::NxDomain])
        .name("broken.test", [DnsReply::ServFail])
        .answer("MiXeD-Case.Test.", [ip("192.0.2.1")])
        .start()
        .await
        .expect("the stub DNS server must start");
    #[rustfmt::skip]
    let cases = [
        ("an A query gets only the IPv4 addresses", "mixed.test.", Ask::A,
            Outcome::Addrs(vec![ip("203.0.113.7"), ip("198.51.100.9")])),
        ("an AAAA query gets only the IPv6 addresses", "mixed.test.", Ask::Aaaa,
            Outcome::Addrs(vec![ip("2001:db8::7")])),
        ("an AAAA query on an IPv4-only name is an empty NOERROR", "v4only.test.", Ask::Aaaa,
            Outcome::NoData),
        ("a scripted NxDomain is NXDOMAIN", "gone.test.", Ask::A, Outcome::NxDomain),
        ("an unknown name is NXDOMAIN", "unknown.test.", Ask::A, Outcome::NxDomain),
        ("ServFail makes the resolver report SERVFAIL", "broken.test.", Ask::A,
            Outcome::Failed("dns_response_code_servfail")),
        ("names match without case or trailing dot", "mixed-case.TEST.", Ask::A,
            Outcome::Addrs(vec![ip("192.0.2.1")])),
    ];
    let resolver = resolver(&dns, Transport::UdpAndTcp, Duration::from_secs(2));
    for (case, name, ask, expected) in cases {
        let got = lookup(&resolver, name, ask).await;
        assert_eq!(
            got, expected,
            "{case}: the lookup must give the scripted outcome"
        );
    }
}

#[tokio::test]
async fn a_tcp_only_resolver_gets_the_same_answers() {
    let dns = StubDns::builder()
        .answer("tcp.test", [ip("203.0.113.20"), ip("2001:db8::20")])
        .start()
        .await
        .expect("the stub DNS server must start");
    let resolver = resolver(&dns, Transport::TcpOnly, Duration::from_secs(2));
    let got = lookup(&resolver, "tcp.test.", Ask::Both).await;
    let expected = Outcome::Addrs(vec![ip("203.0.113.20"), ip("2001:db8::20")]);
    assert_eq!(got, expected, "a lookup over TCP must see both families");
}

#[tokio::test]
async fn an_answer_too_large_for_udp_is_truncated_and_completed_over_tcp() {
    let many: Vec<IpAddr> = (1..=120).map(|n| ip(&format!("198.18.0.{n}"))).collect();
    let dns = StubDns::builder()
        .answer("big.test", many.clone())
        .start()
        .await
        .expect("the stub DNS server must start");
    let resolver = resolver(&dns, Transport::UdpAndTcp, Duration::from_secs(2));
    let got = lookup(&resolver, "big.test.", Ask::A).await;
    assert_eq!(got, Outcome::Addrs(many), "all 120 addresses must arrive");
    assert_eq!(
        dns.queries_of("big.test", RecordType::A),
        2,
        "a truncated UDP answer must be followed by one TCP query"
    );
}

#[tokio::test]
async fn a_dropped_query_times_out_within_the_resolver_timeout() {
    let dns = StubDns::builder()
        .name("silent.test", [DnsReply::Drop])
        .start()
        .await
        .expect("the stub DNS server must start");
    let timeout = Duration::from_millis(300);
    let resolver = resolver(&dns, Transport::UdpOnly, timeout);
    let started = Instant::now();
    let got = lookup(&resolver, "silent.test.", Ask::A).await;
    let waited = started.elapsed();
    assert_eq!(
        got,
        Outcome::Failed("timeout"),
        "a dropped query must time out"
    );
    assert!(
        waited >= timeout && waited < Duration::from_secs(3),
        "the timeout must come from the resolver's own {timeout:?}, took {waited:?}"
    );
    assert_eq!(
        dns.queries("silent.test"),
        1,
        "one UDP attempt, dropped, must be counted"
    );
}

#[tokio::test]
async fn a_sequence_advances_one_lookup_at_a_time_and_its_last_reply_repeats() {
    let (first, second) = (ip("203.0.113.1"), ip("10.0.0.1"));
    let dns = StubDns::builder()
        .name(
            "rebind.test",
            [
                DnsReply::Answer(vec![first, ip("2001:db8::1")]),
                DnsReply::Answer(vec![second]),
            ],
        )
        .start()
        .await
        .expect("the stub DNS server must start");
    let resolver = resolver(&dns, Transport::UdpAndTcp, Duration::from_secs(2));
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(lookup(&resolver, "rebind.test.", Ask::Both).await);
    }
    let expected = [
        Outcome::Addrs(vec![first, ip("2001:db8::1")]),
        Outcome::Addrs(vec![second]),
        Outcome::Addrs(vec![second]),
    ];
    assert_eq!(
        seen, expected,
        "each dual-stack lookup must see the next step, then the last"
    );
    assert_eq!(
        dns.queries_of("rebind.test", RecordType::A),
        3,
        "one A query per lookup"
    );
    assert_eq!(
        dns.queries_of("rebind.test", RecordType::AAAA),
        3,
        "one AAAA query per lookup"
    );
    assert_eq!(
        dns.queries("REBIND.test."),
        6,
        "counters must match names like queries do"
    );
}

#[tokio::test]
async fn counters_start_at_zero_and_count_unknown_names_too() {
    let dns = StubDns::builder()
        .answer("counted.test", [ip("203.0.113.30")])
        .start()
        .await
        .expect("the stub DNS server must start");
    assert_eq!(dns.queries("counted.test"), 0, "no query yet");
    let resolver = resolver(&dns, Transport::UdpAndTcp, Duration::from_secs(2));
    lookup(&resolver, "counted.test.", Ask::A).await;
    lookup(&resolver, "counted.test.", Ask::A).await;
    lookup(&resolver, "nowhere.test.", Ask::A).await;
    assert_eq!(
        dns.queries("counted.test"),
        2,
        "caching is off, so both lookups must query"
    );
    assert_eq!(
        dns.queries("nowhere.test"),
        1,
        "an unknown name must be counted"
    );
    assert_eq!(
        dns.queries("other.test"),
        0,
        "a name never asked stays at zero"
    );
}

#[tokio::test]
async fn set_replaces_a_names_answers_while_the_server_runs() {
    let dns = StubDns::builder()
        .answer("moving.test", [ip("203.0.113.40")])
        .start()
        .await
        .expect("the stub DNS server must start");
    let resolver = resolver(&dns, Transport::UdpAndTcp, Duration::from_secs(2));
    let before = lookup(&resolver, "moving.test.", Ask::A).await;
    dns.set("moving.test", [DnsReply::NxDomain]);
    let after = lookup(&resolver, "moving.test.", Ask::A).await;
    assert_eq!(
        before,
        Outcome::Addrs(vec![ip("203.0.113.40")]),
        "the first script must apply"
    );
    assert_eq!(after, Outcome::NxDomain, "the replaced script must apply");
    assert_eq!(dns.queries("moving.test"), 2, "set must keep the counters");
}
