//! Stub DNS server for resolver tests: scripted answers per name over UDP and TCP on one
//! loopback port, with per-name query counters, so rebinding, NXDOMAIN, SERVFAIL and timeout
//! behaviour of the gate's resolver are testable without any real DNS.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use fleetgate_e2e::dns::{DnsReply, StubDns};
//! let dns = StubDns::builder()
//!     .answer("safe.test", ["127.0.0.1".parse()?])
//!     .name("rebind.test", [
//!         DnsReply::Answer(vec!["93.184.216.34".parse()?]),
//!         DnsReply::Answer(vec!["10.0.0.1".parse()?]),
//!     ])
//!     .start()
//!     .await?;
//! let server = dns.addr();
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::Context as _;
use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinSet;

use crate::background::BackgroundTasks;

/// Largest UDP reply a client that sent no EDNS record accepts (RFC 1035).
const CLASSIC_UDP_LIMIT: usize = 512;
/// The payload size this server advertises in its own EDNS record.
const ADVERTISED_UDP_PAYLOAD: u16 = 1232;
/// How often binding TCP on the UDP socket's port is retried if another process took it.
const BIND_ATTEMPTS: usize = 20;

/// One scripted reply to one DNS query. Every record carries TTL 0 so resolvers do not cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsReply {
    /// NOERROR with the addresses of the queried family: A records for the IPv4 addresses on an
    /// A query, AAAA records for the IPv6 addresses on an AAAA query. When none match the
    /// family (or the query is another type), an empty NOERROR answer with a TTL-0 SOA.
    Answer(Vec<IpAddr>),
    /// NXDOMAIN, with a TTL-0 SOA so the negative answer is not cached either.
    NxDomain,
    /// SERVFAIL: the resolver reports an error.
    ServFail,
    /// No reply at all: the client sees a timeout.
    Drop,
}

/// Configures a [`StubDns`] before it starts; see [`StubDns::builder`].
#[derive(Debug, Default)]
pub struct StubDnsBuilder {
    scripts: Vec<(String, Vec<DnsReply>)>,
}

/// A running stub DNS server on `127.0.0.1` (UDP and TCP on the same port); stops on drop.
///
/// Each name has a sequence of replies. Queries of one type (A, AAAA, ...) walk the sequence
/// with their own cursor, one step per query, and the last reply repeats; so a dual-stack lookup
/// (one A and one AAAA query) sees the same step, and the next lookup sees the next step.
/// Names match case-insensitively, with or without a trailing dot. Unknown names get NXDOMAIN.
#[derive(Debug)]
pub struct StubDns {
    addr: SocketAddr,
    zone: Arc<Mutex<Zone>>,
    _tasks: BackgroundTasks,
}

/// The scripted replies and the query log shared by the UDP and TCP loops.
#[derive(Debug, Default)]
struct Zone {
    scripts: HashMap<String, Script>,
    queries: HashMap<String, HashMap<RecordType, usize>>,
}

/// One name's reply sequence and how far each query type has walked it.
#[derive(Debug)]
struct Script {
    replies: Vec<DnsReply>,
    cursors: HashMap<RecordType, usize>,
}

/// The transport a query arrived on, which decides whether a large reply is truncated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Udp,
    Tcp,
}

// === impl StubDnsBuilder ===

impl StubDnsBuilder {
    /// Scripts `name` with a sequence of replies, one consumed per query; the last one repeats.
    /// An empty sequence behaves like an unknown name (NXDOMAIN).
    pub fn name(mut self, name: &str, replies: impl IntoIterator<Item = DnsReply>) -> Self {
        self.scripts
            .push((normalize(name), replies.into_iter().collect()));
        self
    }

    /// Shorthand for a name that always answers with `ips`.
    pub fn answer(self, name: &str, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        self.name(name, [DnsReply::Answer(ips.into_iter().collect())])
    }

    /// Binds UDP and TCP on one loopback port and starts serving.
    pub async fn start(self) -> anyhow::Result<StubDns> {
        let sockets = bind_udp_and_tcp().await?;
        Ok(self.serve(sockets))
    }

    /// Binds UDP and TCP on `addr` (a fixed port, e.g. `:53` on a bridge address that pods
    /// use as their name server) and starts serving.
    pub async fn start_on(self, addr: SocketAddr) -> anyhow::Result<StubDns> {
        let udp = UdpSocket::bind(addr)
            .await
            .with_context(|| format!("failed to bind the stub DNS UDP socket on {addr}"))?;
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("failed to bind the stub DNS TCP socket on {addr}"))?;
        Ok(self.serve((udp, tcp)))
    }

    fn serve(self, (udp, tcp): (UdpSocket, TcpListener)) -> StubDns {
        let mut zone = Zone::default();
        for (name, replies) in self.scripts {
            zone.set(name, replies);
        }
        let zone = Arc::new(Mutex::new(zone));
        // Both sockets are bound; an address they cannot report is unspecified.
        let addr = udp
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
        let mut tasks = BackgroundTasks::default();
        tasks.spawn(serve_udp(udp, Arc::clone(&zone)));
        tasks.spawn(serve_tcp(tcp, Arc::clone(&zone)));
        StubDns {
            addr,
            zone,
            _tasks: tasks,
        }
    }
}

// === impl StubDns ===

impl StubDns {
    /// Starts configuring a stub server.
    pub fn builder() -> StubDnsBuilder {
        StubDnsBuilder::default()
    }

    /// The address the server listens on, for UDP and TCP alike.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the reply sequence of `name` while the server runs, starting again at its first
    /// step. Query counters are kept.
    pub fn set(&self, name: &str, replies: impl IntoIterator<Item = DnsReply>) {
        lock(&self.zone).set(normalize(name), replies.into_iter().collect());
    }

    /// How many queries of any type arrived for `name` (scripted or not, answered or dropped).
    pub fn queries(&self, name: &str) -> usize {
        lock(&self.zone)
            .queries
            .get(&normalize(name))
            .map_or(0, |by_type| by_type.values().sum())
    }

    /// How many queries of `record_type` arrived for `name`.
    pub fn queries_of(&self, name: &str, record_type: RecordType) -> usize {
        lock(&self.zone)
            .queries
            .get(&normalize(name))
            .and_then(|by_type| by_type.get(&record_type).copied())
            .unwrap_or(0)
    }
}

// === impl Zone ===

impl Zone {
    fn set(&mut self, name: String, replies: Vec<DnsReply>) {
        let script = Script {
            replies,
            cursors: HashMap::new(),
        };
        self.scripts.insert(name, script);
    }

    /// Counts the query and picks its reply, advancing the name's cursor for `record_type`.
    fn next_reply(&mut self, name: &str, record_type: RecordType) -> DnsReply {
        *self
            .queries
            .entry(name.to_owned())
            .or_default()
            .entry(record_type)
            .or_default() += 1;
        let Some(script) = self.scripts.get_mut(name) else {
            return DnsReply::NxDomain;
        };
        let cursor = script.cursors.entry(record_type).or_default();
        let reply = script
            .replies
            .get(*cursor)
            .or(script.replies.last())
            .cloned();
        *cursor = (*cursor + 1).min(script.replies.len());
        reply.unwrap_or(DnsReply::NxDomain)
    }
}

/// Lowercases a name and drops its trailing dot, the form names are matched in.
fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn lock(zone: &Mutex<Zone>) -> MutexGuard<'_, Zone> {
    // A panicking test thread must not take the server down with a poisoned lock.
    zone.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Binds UDP on port 0, then TCP on the same port (retrying if that port is taken for TCP).
async fn bind_udp_and_tcp() -> anyhow::Result<(UdpSocket, TcpListener)> {
    let mut last_error = None;
    for _ in 0..BIND_ATTEMPTS {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("failed to bind the stub DNS UDP socket")?;
        let addr = udp.local_addr().context("failed to read the UDP address")?;
        match TcpListener::bind(addr).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(error) => last_error = Some(error),
        }
    }
    Err(anyhow::anyhow!(
        "failed to bind TCP on the stub DNS UDP port after {BIND_ATTEMPTS} attempts: {last_error:?}"
    ))
}

async fn serve_udp(socket: UdpSocket, zone: Arc<Mutex<Zone>>) {
    let mut buf = vec![0_u8; 65_535];
    loop {
        let Ok((len, peer)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        let Some(reply) = buf
            .get(..len)
            .and_then(|q| respond(&zone, q, Transport::Udp))
        else {
            continue;
        };
        // A lost datagram is what UDP clients already handle; nothing to report here.
        let _ = socket.send_to(&reply, peer).await;
    }
}

async fn serve_tcp(listener: TcpListener, zone: Arc<Mutex<Zone>>) {
    // Owning the connections here means aborting this task closes them all.
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        while connections.try_join_next().is_some() {}
        connections.spawn(serve_tcp_connection(stream, Arc::clone(&zone)));
    }
}

/// Serves length-prefixed DNS messages (RFC 1035 §4.2.2) until the client closes.
async fn serve_tcp_connection(mut stream: TcpStream, zone: Arc<Mutex<Zone>>) {
    loop {
        let Ok(len) = stream.read_u16().await else {
            return;
        };
        let mut query = vec![0_u8; usize::from(len)];
        if stream.read_exact(&mut query).await.is_err() {
            return;
        }
        let Some(reply) = respond(&zone, &query, Transport::Tcp) else {
            // A dropped query keeps the connection open, so the client times out.
            continue;
        };
        let Ok(reply_len) = u16::try_from(reply.len()) else {
            return;
        };
        let mut frame = reply_len.to_be_bytes().to_vec();
        frame.extend_from_slice(&reply);
        if stream.write_all(&frame).await.is_err() {
            return;
        }
    }
}

/// Decodes one query and encodes its scripted reply; `None` means send nothing.
fn respond(zone: &Mutex<Zone>, query_bytes: &[u8], transport: Transport) -> Option<Vec<u8>> {
    let request = Message::from_vec(query_bytes).ok()?;
    let Some(query) = request.queries.first().cloned() else {
        let refusal = Message::error_msg(request.id, request.op_code, ResponseCode::FormErr);
        return refusal.to_vec().ok();
    };
    let name = normalize(&query.name().to_ascii());
    let reply = lock(zone).next_reply(&name, query.query_type());
    let response = build_response(&request, &query, &reply)?;
    let bytes = response.to_vec().ok()?;
    if transport == Transport::Udp && bytes.len() > udp_limit(&request) {
        // Sets TC so the resolver retries over TCP, as a real server would.
        return response.truncate().to_vec().ok();
    }
    Some(bytes)
}

/// Builds the response message for `reply`, or `None` for [`DnsReply::Drop`].
fn build_response(request: &Message, query: &Query, reply: &DnsReply) -> Option<Message> {
    let mut response = Message::response(request.id, request.op_code);
    response.metadata.authoritative = true;
    response.metadata.recursion_desired = request.recursion_desired;
    response.metadata.recursion_available = true;
    // The query is echoed as received, so resolvers that randomise name case accept it.
    response.add_query(query.clone());
    if request.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(ADVERTISED_UDP_PAYLOAD);
        response.set_edns(edns);
    }
    match reply {
        DnsReply::Drop => return None,
        DnsReply::ServFail => response.metadata.response_code = ResponseCode::ServFail,
        DnsReply::NxDomain => {
            response.metadata.response_code = ResponseCode::NXDomain;
            response.add_authority(zero_ttl_soa(query.name()));
        }
        DnsReply::Answer(ips) => {
            let records = address_records(query, ips);
            if records.is_empty() {
                response.add_authority(zero_ttl_soa(query.name()));
            } else {
                response.add_answers(records);
            }
        }
    }
    Some(response)
}

/// The A or AAAA records of `ips` that match the query's type, with TTL 0.
fn address_records(query: &Query, ips: &[IpAddr]) -> Vec<Record> {
    ips.iter()
        .filter_map(|ip| match (query.query_type(), ip) {
            (RecordType::A, IpAddr::V4(v4)) => Some(RData::A(A(*v4))),
            (RecordType::AAAA, IpAddr::V6(v6)) => Some(RData::AAAA(AAAA(*v6))),
            _ => None,
        })
        .map(|rdata| Record::from_rdata(query.name().clone(), 0, rdata))
        .collect()
}

/// An SOA for negative answers whose TTL and minimum are 0, so resolvers cache nothing.
fn zero_ttl_soa(owner: &Name) -> Record {
    let soa = SOA::new(Name::root(), Name::root(), 1, 60, 60, 60, 0);
    Record::from_rdata(owner.clone(), 0, RData::SOA(soa))
}

/// The largest UDP reply the client accepts: its EDNS payload size, else 512 bytes.
fn udp_limit(request: &Message) -> usize {
    request
        .edns
        .as_ref()
        .map_or(CLASSIC_UDP_LIMIT, |edns| usize::from(edns.max_payload()))
        .max(CLASSIC_UDP_LIMIT)
}
