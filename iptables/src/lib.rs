//! fleetgate-iptables, run as `fleetgate-proxy init-iptables` (the sidecar's init container): a
//! program of its own beside the gate, which shares nothing with it but the transparent
//! listener's port ([`DEFAULT_TO_PORT`]).
//!
//! The nat-table rules that send the pod's outbound TCP to
//! the transparent listener, generated as data ([`Rules`]) and rendered for
//! `iptables-restore` / `ip6tables-restore` or as `iptables` argv lists.
//!
//! ```text
//!  nat OUTPUT ─(-p tcp)─► FLEETGATE_OUTPUT
//!     ├─ -m owner --uid-owner 15000          RETURN   the gate's own traffic (no loop)
//!     ├─ [-m owner --gid-owner G]            RETURN
//!     ├─ -o lo                               RETURN   loopback (the gate's API, the agent's own ports)
//!     ├─ [-m multiport --dports P,..]        RETURN   --ignore-ports, 15 per rule
//!     ├─ [-d CIDR]                           RETURN   --ignore-cidrs of this family
//!     └─ -p tcp ─► FLEETGATE_REDIRECT ─► REDIRECT --to-ports 15182
//!
//!  nat OUTPUT ─(-p udp)─► FLEETGATE_UDP
//!     ├─ -m owner --uid-owner 15000          RETURN   the gate's own lookups
//!     ├─ [-m owner --gid-owner G]            RETURN
//!     ├─ -o lo                               RETURN
//!     ├─ -d RESOLVER -p udp --dport 53       RETURN   DNS to the pod's name servers
//!     ├─ [-d CIDR]                           RETURN   --ignore-cidrs of this family
//!     └─ -p udp ─► REDIRECT --to-ports 15182          refused: nothing listens there for UDP
//! ```
//!
//! Applying is idempotent: `iptables-save -t nat` is read first; the chain declarations
//! create-or-flush the two chains, and the jump from OUTPUT is inserted only when missing
//! (extra copies are deleted). `--cleanup` deletes the jumps, flushes and deletes the chains.
//! UDP is not relayed: other than DNS to the pod's name servers (the `nameserver` lines of
//! `/etc/resolv.conf`, or `--dns-servers`), a UDP datagram of any uid but the gate's is
//! redirected to the transparent listener's port on loopback, where nothing listens for UDP:
//! the sender gets "connection refused" at once (as from a REJECT rule; the nat table cannot
//! drop) and nothing leaves the pod. QUIC clients fall back to TCP, which is captured.
//! `--allow-udp` leaves UDP alone.

// Printing to stdout is this module's job: `--dry-run` prints the rules.
#![allow(clippy::print_stdout)]

use std::fmt;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::str::FromStr;

use ipnet::IpNet;

#[cfg(test)]
mod tests;

/// The uid the gate runs as; its traffic is never redirected.
pub const DEFAULT_PROXY_UID: u32 = 15000;
/// The transparent listener's port.
pub const DEFAULT_TO_PORT: u16 = 15182;
/// The chain jumped to from nat OUTPUT: the exemptions.
pub const OUTPUT_CHAIN: &str = "FLEETGATE_OUTPUT";
/// The chain that redirects to the transparent listener.
pub const REDIRECT_CHAIN: &str = "FLEETGATE_REDIRECT";
/// The chain jumped to from nat OUTPUT for UDP: DNS out, the rest refused.
pub const UDP_CHAIN: &str = "FLEETGATE_UDP";
/// fleetgate's chains, in declaration order.
const CHAINS: [&str; 3] = [OUTPUT_CHAIN, REDIRECT_CHAIN, UDP_CHAIN];
/// Where the pod's name servers are listed.
const RESOLV_CONF: &str = "/etc/resolv.conf";
/// `-m multiport` takes at most 15 ports (a range counts as two).
const MULTIPORT_MAX: usize = 15;

/// `init-iptables` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// The gate's uid: its traffic is exempt (loops otherwise).
    #[arg(long, default_value_t = DEFAULT_PROXY_UID)]
    pub proxy_uid: u32,
    /// Also exempt traffic of this gid.
    #[arg(long)]
    pub proxy_gid: Option<u32>,
    /// The transparent listener's port.
    #[arg(long, default_value_t = DEFAULT_TO_PORT)]
    pub to_port: u16,
    /// Destination ports never redirected (`22`, `8000-8100`; comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    pub ignore_ports: Vec<PortRange>,
    /// Destination networks never redirected (IPv4 and IPv6 CIDRs; each family gets its own).
    #[arg(long, value_delimiter = ',')]
    pub ignore_cidrs: Vec<IpNet>,
    /// Leave IPv6 alone (only for kernels without IPv6: an unredirected family is an egress hole).
    #[arg(long)]
    pub no_ipv6: bool,
    /// Leave UDP alone (by default only DNS to the pod's name servers goes out: an open UDP
    /// path is an egress hole, e.g. QUIC to a blocklisted site).
    #[arg(long)]
    pub allow_udp: bool,
    /// The name servers DNS may go to over UDP (default: the `nameserver` lines of
    /// /etc/resolv.conf).
    #[arg(long, value_delimiter = ',')]
    pub dns_servers: Vec<std::net::IpAddr>,
    /// Print the rules instead of applying them.
    #[arg(long)]
    pub dry_run: bool,
    /// Remove the rules instead of installing them.
    #[arg(long)]
    pub cleanup: bool,
    /// `--dry-run` output: `restore` (the iptables-restore input) or `commands` (iptables argv).
    #[arg(long, value_enum, default_value_t = Format::Restore)]
    pub format: Format,
    /// Which iptables binaries: `auto` (nft, then the default, then legacy), `nft`, `legacy`.
    #[arg(long, value_enum, default_value_t = RestoreBackend::Auto)]
    pub backend: RestoreBackend,
}

/// How `--dry-run` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `iptables-restore --noflush` input.
    Restore,
    /// One `iptables ...` command per line.
    Commands,
}

/// Which iptables implementation applies the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RestoreBackend {
    /// `iptables-nft-restore`, else `iptables-restore`, else `iptables-legacy-restore`.
    Auto,
    /// Only the nft variant.
    Nft,
    /// Only the legacy variant.
    Legacy,
}

/// An address family: one rule set each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// iptables.
    V4,
    /// ip6tables.
    V6,
}

/// A destination port or inclusive port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port (equal to `first` for one port).
    pub last: u16,
}

/// What the rules are built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Exempt uid.
    pub proxy_uid: u32,
    /// Exempt gid, if any.
    pub proxy_gid: Option<u32>,
    /// REDIRECT target port.
    pub to_port: u16,
    /// Exempt destination ports.
    pub ignore_ports: Vec<PortRange>,
    /// Exempt destination networks (both families; [`Rules::build`] keeps its own).
    pub ignore_cidrs: Vec<IpNet>,
    /// UDP: `None` leaves it alone; `Some(servers)` lets DNS out to `servers` only.
    pub udp_dns_only: Option<Vec<std::net::IpAddr>>,
}

/// One rule: the chain it belongs to and its match/target arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The chain.
    pub chain: &'static str,
    /// Everything after `-A CHAIN`.
    pub args: Vec<String>,
}

/// The nat-table rule set of one family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The family.
    pub family: Family,
    /// The chains, in declaration order.
    pub chains: Vec<&'static str>,
    /// The rules of those chains, in order.
    pub rules: Vec<Rule>,
    /// The jumps from nat OUTPUT: TCP into [`OUTPUT_CHAIN`], UDP into [`UDP_CHAIN`].
    pub jumps: Vec<Rule>,
}

/// Why `init-iptables` failed.
#[derive(Debug, thiserror::Error)]
pub enum IptablesError {
    /// The arguments make no sense.
    #[error("invalid arguments: {0}")]
    Invalid(String),
    /// No iptables binary of the wanted backend on PATH.
    #[error("failed to find {0} on PATH (install the iptables package)")]
    ToolMissing(String),
    /// The binary could not be started or fed.
    #[error("failed to run {tool}: {source}")]
    Spawn {
        /// The binary.
        tool: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The binary refused the rules.
    #[error("failed to apply the {family} rules: {tool} exited with {status}: {stderr}")]
    Failed {
        /// `IPv4` or `IPv6`.
        family: &'static str,
        /// The binary.
        tool: String,
        /// Its exit status.
        status: String,
        /// What it said.
        stderr: String,
    },
}

// === impl PortRange ===

impl FromStr for PortRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let port = |p: &str| match p.trim().parse::<u16>() {
            Ok(0) | Err(_) => Err(format!("`{s}` is not a port (1-65535) or a range a-b")),
            Ok(n) => Ok(n),
        };
        let (first, last) = match s.split_once(['-', ':']) {
            Some((a, b)) => (port(a)?, port(b)?),
            None => (port(s)?, port(s)?),
        };
        if first > last {
            return Err(format!("`{s}`: the range ends before it starts"));
        }
        Ok(Self { first, last })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}:{}", self.first, self.last)
        }
    }
}

// === impl Family ===

impl Family {
    /// `IPv4` / `IPv6`.
    pub fn label(self) -> &'static str {
        match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        }
    }

    /// `iptables` / `ip6tables`.
    pub fn command(self) -> &'static str {
        match self {
            Self::V4 => "iptables",
            Self::V6 => "ip6tables",
        }
    }

    fn holds(self, ip: &std::net::IpAddr) -> bool {
        matches!(
            (self, ip),
            (Self::V4, std::net::IpAddr::V4(_)) | (Self::V6, std::net::IpAddr::V6(_))
        )
    }

    fn contains(self, net: &IpNet) -> bool {
        matches!(
            (self, net),
            (Self::V4, IpNet::V4(_)) | (Self::V6, IpNet::V6(_))
        )
    }
}

// === impl Config ===

impl Default for Config {
    fn default() -> Self {
        Self {
            proxy_uid: DEFAULT_PROXY_UID,
            proxy_gid: None,
            to_port: DEFAULT_TO_PORT,
            ignore_ports: Vec::new(),
            ignore_cidrs: Vec::new(),
            udp_dns_only: Some(Vec::new()),
        }
    }
}

impl TryFrom<&Args> for Config {
    type Error = IptablesError;

    fn try_from(args: &Args) -> Result<Self, Self::Error> {
        if args.proxy_uid == 0 {
            return Err(IptablesError::Invalid(
                "--proxy-uid must not be 0: every root process would bypass the capture".into(),
            ));
        }
        if args.to_port == 0 {
            return Err(IptablesError::Invalid("--to-port must be 1-65535".into()));
        }
        let udp_dns_only = match (args.allow_udp, args.dns_servers.is_empty()) {
            (true, _) => None,
            (false, false) => Some(args.dns_servers.clone()),
            (false, true) => Some(match std::fs::read_to_string(RESOLV_CONF) {
                Ok(text) => name_servers(&text),
                Err(e) => {
                    // No DNS over UDP then (TCP to a name server is captured like any
                    // connection); said once, where the init container's log shows it.
                    eprintln!(
                        "fleetgate-proxy: init-iptables: failed to read {RESOLV_CONF} ({e}); \
                         DNS over UDP is refused too (pass --dns-servers)"
                    );
                    Vec::new()
                }
            }),
        };
        Ok(Self {
            proxy_uid: args.proxy_uid,
            proxy_gid: args.proxy_gid,
            to_port: args.to_port,
            ignore_ports: args.ignore_ports.clone(),
            ignore_cidrs: args.ignore_cidrs.iter().map(IpNet::trunc).collect(),
            udp_dns_only,
        })
    }
}

// === impl Rule ===

impl Rule {
    fn new(chain: &'static str, args: &[&str], comment: &str) -> Self {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
        all.extend(["-m", "comment", "--comment"].map(String::from));
        all.push(format!("fleetgate/{comment}"));
        Self { chain, args: all }
    }

    /// `-A CHAIN args...` (or another operation).
    fn line(&self, op: &str) -> String {
        format!("{op} {} {}", self.chain, self.args.join(" "))
    }
}

// === impl Rules ===

impl Rules {
    /// The rule set of `family` for `cfg`.
    pub fn build(cfg: &Config, family: Family) -> Self {
        let mut rules = Vec::new();
        let uid = cfg.proxy_uid.to_string();
        let uid_args = ["-m", "owner", "--uid-owner", uid.as_str(), "-j", "RETURN"];
        rules.push(Rule::new(OUTPUT_CHAIN, &uid_args, "ignore-proxy-uid"));
        if let Some(gid) = cfg.proxy_gid {
            let gid = gid.to_string();
            let gid_args = ["-m", "owner", "--gid-owner", gid.as_str(), "-j", "RETURN"];
            rules.push(Rule::new(OUTPUT_CHAIN, &gid_args, "ignore-proxy-gid"));
        }
        let lo = ["-o", "lo", "-j", "RETURN"];
        rules.push(Rule::new(OUTPUT_CHAIN, &lo, "ignore-loopback"));
        for group in port_groups(&cfg.ignore_ports) {
            let ports = ["-p", "tcp", "-m", "multiport", "--dports", group.as_str()];
            let args: Vec<&str> = ports.iter().copied().chain(["-j", "RETURN"]).collect();
            rules.push(Rule::new(OUTPUT_CHAIN, &args, "ignore-ports"));
        }
        for net in cfg.ignore_cidrs.iter().filter(|n| family.contains(n)) {
            let net = net.to_string();
            let args = ["-d", net.as_str(), "-j", "RETURN"];
            rules.push(Rule::new(OUTPUT_CHAIN, &args, "ignore-cidr"));
        }
        let to_redirect = ["-p", "tcp", "-j", REDIRECT_CHAIN];
        rules.push(Rule::new(OUTPUT_CHAIN, &to_redirect, "redirect-tcp"));
        let port = cfg.to_port.to_string();
        let redirect = ["-p", "tcp", "-j", "REDIRECT", "--to-ports", port.as_str()];
        rules.push(Rule::new(
            REDIRECT_CHAIN,
            &redirect,
            "to-transparent-listener",
        ));
        let mut jumps = vec![Rule::new(
            "OUTPUT",
            &["-p", "tcp", "-j", OUTPUT_CHAIN],
            "capture-outbound-tcp",
        )];
        let mut chains = vec![OUTPUT_CHAIN, REDIRECT_CHAIN];
        if let Some(servers) = &cfg.udp_dns_only {
            chains.push(UDP_CHAIN);
            rules.push(Rule::new(UDP_CHAIN, &uid_args, "ignore-proxy-uid"));
            if let Some(gid) = cfg.proxy_gid {
                let gid = gid.to_string();
                let gid_args = ["-m", "owner", "--gid-owner", gid.as_str(), "-j", "RETURN"];
                rules.push(Rule::new(UDP_CHAIN, &gid_args, "ignore-proxy-gid"));
            }
            rules.push(Rule::new(UDP_CHAIN, &lo, "ignore-loopback"));
            for server in servers.iter().filter(|ip| family.holds(ip)) {
                let net = IpNet::from(*server).to_string();
                let args = [
                    "-d",
                    net.as_str(),
                    "-p",
                    "udp",
                    "--dport",
                    "53",
                    "-j",
                    "RETURN",
                ];
                rules.push(Rule::new(UDP_CHAIN, &args, "dns-to-name-server"));
            }
            for net in cfg.ignore_cidrs.iter().filter(|n| family.contains(n)) {
                let net = net.to_string();
                let args = ["-d", net.as_str(), "-j", "RETURN"];
                rules.push(Rule::new(UDP_CHAIN, &args, "ignore-cidr"));
            }
            let refuse = ["-p", "udp", "-j", "REDIRECT", "--to-ports", port.as_str()];
            rules.push(Rule::new(UDP_CHAIN, &refuse, "refuse-udp"));
            jumps.push(Rule::new(
                "OUTPUT",
                &["-p", "udp", "-j", UDP_CHAIN],
                "refuse-outbound-udp",
            ));
        }
        Self {
            family,
            chains,
            rules,
            jumps,
        }
    }

    /// `iptables-restore --noflush` input that installs this set over `existing` (the output
    /// of `iptables-save -t nat`; empty when nothing is installed).
    pub fn restore_script(&self, existing: &str) -> String {
        let installed = Installed::parse(existing);
        let mut out = format!(
            "# fleetgate init-iptables: {} nat table\n*nat\n",
            self.family.label()
        );
        // A chain installed before but not wanted now (`--allow-udp` on a re-run): its jumps
        // go first, then the chain.
        let stale: Vec<&str> = installed
            .chains
            .iter()
            .copied()
            .filter(|c| !self.chains.contains(c))
            .collect();
        for (target, line) in &installed.jumps {
            if stale.contains(target) {
                out.push_str(&delete_line(line));
            }
        }
        for chain in &self.chains {
            // In --noflush mode a declared chain is created, or flushed when it exists.
            out.push_str(&format!(":{chain} - [0:0]\n"));
        }
        for op in ["-F", "-X"] {
            for chain in &stale {
                out.push_str(&format!("{op} {chain}\n"));
            }
        }
        for rule in &self.rules {
            out.push_str(&rule.line("-A"));
            out.push('\n');
        }
        for jump in &self.jumps {
            let target = jump_target(&jump.args).unwrap_or_default();
            let lines: Vec<&String> = installed
                .jumps
                .iter()
                .filter(|(t, _)| *t == target)
                .map(|(_, l)| l)
                .collect();
            match lines.split_first() {
                None => out.push_str(&format!("-I OUTPUT 1 {}\n", jump.args.join(" "))),
                Some((_kept, extra)) => {
                    for line in extra {
                        out.push_str(&delete_line(line));
                    }
                }
            }
        }
        out.push_str("COMMIT\n");
        out
    }

    /// One `iptables`/`ip6tables` argv per step of a fresh install.
    pub fn commands(&self) -> Vec<Vec<String>> {
        let base = |rest: Vec<String>| {
            let mut argv = vec![self.family.command().to_string(), "-t".into(), "nat".into()];
            argv.extend(rest);
            argv
        };
        let mut out: Vec<Vec<String>> = self
            .chains
            .iter()
            .map(|c| base(vec!["-N".into(), (*c).into()]))
            .collect();
        for rule in self.rules.iter().chain(&self.jumps) {
            let mut rest = vec!["-A".to_string(), rule.chain.to_string()];
            rest.extend(rule.args.iter().cloned());
            out.push(base(rest));
        }
        out
    }

    /// What `iptables-save -t nat` shows once this set is installed (for `--cleanup --dry-run`).
    pub fn as_saved(&self) -> String {
        let mut out = String::from("*nat\n:OUTPUT ACCEPT [0:0]\n");
        for chain in &self.chains {
            out.push_str(&format!(":{chain} - [0:0]\n"));
        }
        for jump in &self.jumps {
            out.push_str(&jump.line("-A"));
            out.push('\n');
        }
        for rule in &self.rules {
            out.push_str(&rule.line("-A"));
            out.push('\n');
        }
        out.push_str("COMMIT\n");
        out
    }
}

/// `iptables-restore --noflush` input removing fleetgate's jumps and chains from `existing`;
/// `None` when nothing of fleetgate's is installed.
pub fn cleanup_script(family: Family, existing: &str) -> Option<String> {
    let installed = Installed::parse(existing);
    if installed.jumps.is_empty() && installed.chains.is_empty() {
        return None;
    }
    let mut out = format!(
        "# fleetgate init-iptables --cleanup: {} nat table\n*nat\n",
        family.label()
    );
    for (_, line) in &installed.jumps {
        out.push_str(&delete_line(line));
    }
    for op in ["-F", "-X"] {
        for chain in &installed.chains {
            out.push_str(&format!("{op} {chain}\n"));
        }
    }
    out.push_str("COMMIT\n");
    Some(out)
}

/// The `-D` twin of a saved `-A` line.
fn delete_line(saved: &str) -> String {
    format!("-D{}\n", saved.strip_prefix("-A").unwrap_or(saved))
}

/// fleetgate's traces in an `iptables-save -t nat` dump.
#[derive(Debug, Default)]
struct Installed {
    /// `-A OUTPUT ... -j FLEETGATE_OUTPUT|FLEETGATE_UDP` lines, verbatim, with their target.
    jumps: Vec<(&'static str, String)>,
    /// Which of fleetgate's chains exist (in declaration order).
    chains: Vec<&'static str>,
}

impl Installed {
    fn parse(save: &str) -> Self {
        let mut found = Self::default();
        for line in save.lines().map(str::trim) {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() != Some(&"-A") || words.get(1) != Some(&"OUTPUT") {
                continue;
            }
            if let Some(target) = jump_target(&words) {
                found.jumps.push((target, line.to_string()));
            }
        }
        for chain in CHAINS {
            let declared = format!(":{chain} ");
            if save.lines().any(|l| l.trim_start().starts_with(&declared)) {
                found.chains.push(chain);
            }
        }
        found
    }
}

/// Which of fleetgate's jump chains (`-j FLEETGATE_OUTPUT` or `-j FLEETGATE_UDP`) the words
/// of a rule jump to.
fn jump_target<S: AsRef<str>>(words: &[S]) -> Option<&'static str> {
    words.windows(2).find_map(|w| {
        (w[0].as_ref() == "-j")
            .then(|| {
                [OUTPUT_CHAIN, UDP_CHAIN]
                    .into_iter()
                    .find(|c| *c == w[1].as_ref())
            })
            .flatten()
    })
}

/// The addresses of the `nameserver` lines of a resolv.conf (what the pod's resolver asks).
pub fn name_servers(resolv_conf: &str) -> Vec<std::net::IpAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("nameserver"))
                .then(|| words.next())
                .flatten()
        })
        // A scoped IPv6 address (`fe80::1%eth0`) is matched without its zone.
        .filter_map(|a| a.split('%').next()?.parse().ok())
        .collect()
}

/// Ports as `-m multiport --dports` lists of at most 15 slots (a range takes two).
fn port_groups(ports: &[PortRange]) -> Vec<String> {
    let mut groups = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut slots = 0;
    for p in ports {
        let need = if p.first == p.last { 1 } else { 2 };
        if slots + need > MULTIPORT_MAX {
            groups.push(current.join(","));
            current.clear();
            slots = 0;
        }
        current.push(p.to_string());
        slots += need;
    }
    if !current.is_empty() {
        groups.push(current.join(","));
    }
    groups
}

/// The families `args` selects.
pub fn families(args: &Args) -> Vec<Family> {
    if args.no_ipv6 {
        vec![Family::V4]
    } else {
        vec![Family::V4, Family::V6]
    }
}

/// The `--dry-run` text for `args`: per family, the restore input (or the argv lines).
pub fn render_dry_run(args: &Args) -> Result<String, IptablesError> {
    let cfg = Config::try_from(args)?;
    let mut out = String::new();
    for family in families(args) {
        let rules = Rules::build(&cfg, family);
        let restore = format!("{}-restore --noflush", family.command());
        match (args.format, args.cleanup) {
            (Format::Restore, false) => {
                out.push_str(&format!("# {}: {restore}\n", family.label()));
                out.push_str(&rules.restore_script(""));
            }
            (Format::Restore, true) => {
                out.push_str(&format!("# {}: {restore}\n", family.label()));
                let script = cleanup_script(family, &rules.as_saved()).unwrap_or_default();
                out.push_str(&script);
            }
            (Format::Commands, false) => {
                for argv in rules.commands() {
                    out.push_str(&argv.join(" "));
                    out.push('\n');
                }
            }
            (Format::Commands, true) => {
                let cmd = family.command();
                for jump in &rules.jumps {
                    let jump = jump.args.join(" ");
                    out.push_str(&format!("{cmd} -t nat -D OUTPUT {jump}\n"));
                }
                for op in ["-F", "-X"] {
                    for chain in &rules.chains {
                        out.push_str(&format!("{cmd} -t nat {op} {chain}\n"));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Run `init-iptables`: print (`--dry-run`) or apply/remove the rules for every family.
pub fn run(args: &Args) -> ExitCode {
    if args.dry_run {
        return match render_dry_run(args) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("fleetgate-proxy: {e}");
                ExitCode::from(2)
            }
        };
    }
    let result = Config::try_from(args).and_then(|cfg| {
        families(args)
            .into_iter()
            .try_for_each(|family| apply(&cfg, family, args))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ IptablesError::Invalid(_)) => {
            eprintln!("fleetgate-proxy: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("fleetgate-proxy: {e}");
            ExitCode::from(1)
        }
    }
}

/// Apply (or clean up) one family, then print one JSON line saying what was done.
fn apply(cfg: &Config, family: Family, args: &Args) -> Result<(), IptablesError> {
    let tools = Tools::find(family, args.backend)?;
    let existing = tools.save()?;
    let (action, script) = if args.cleanup {
        ("cleanup", cleanup_script(family, &existing))
    } else {
        (
            "install",
            Some(Rules::build(cfg, family).restore_script(&existing)),
        )
    };
    let changed = script.is_some();
    if let Some(script) = script {
        tools.restore(family, &script)?;
    }
    let line = serde_json::json!({
        "family": family.label(), "action": action, "changed": changed,
        "tool": tools.restore.display().to_string(),
    });
    println!("{line}");
    Ok(())
}

/// The save/restore pair of one family and backend.
#[derive(Debug)]
struct Tools {
    save: PathBuf,
    restore: PathBuf,
}

impl Tools {
    fn find(family: Family, backend: RestoreBackend) -> Result<Self, IptablesError> {
        let cmd = family.command();
        let variants: &[&str] = match backend {
            RestoreBackend::Auto => &["-nft", "", "-legacy"],
            RestoreBackend::Nft => &["-nft"],
            RestoreBackend::Legacy => &["-legacy"],
        };
        for variant in variants {
            let restore = on_path(&format!("{cmd}{variant}-restore"));
            let save = on_path(&format!("{cmd}{variant}-save"));
            if let (Some(restore), Some(save)) = (restore, save) {
                return Ok(Self { save, restore });
            }
        }
        let wanted: Vec<String> = variants
            .iter()
            .map(|v| format!("{cmd}{v}-restore"))
            .collect();
        Err(IptablesError::ToolMissing(wanted.join(" or ")))
    }

    fn save(&self) -> Result<String, IptablesError> {
        let tool = self.save.display().to_string();
        let out = Command::new(&self.save)
            .args(["-t", "nat"])
            .output()
            .map_err(|source| IptablesError::Spawn {
                tool: tool.clone(),
                source,
            })?;
        // A table that was never used may make save fail on some backends: treat as empty.
        Ok(if out.status.success() {
            String::from_utf8_lossy(&out.stdout).into_owned()
        } else {
            String::new()
        })
    }

    fn restore(&self, family: Family, script: &str) -> Result<(), IptablesError> {
        let tool = self.restore.display().to_string();
        let spawn = |source| IptablesError::Spawn {
            tool: tool.clone(),
            source,
        };
        let mut child = Command::new(&self.restore)
            .arg("--noflush")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(script.as_bytes()).map_err(spawn)?;
        }
        let out = child.wait_with_output().map_err(spawn)?;
        if out.status.success() {
            return Ok(());
        }
        Err(IptablesError::Failed {
            family: family.label(),
            tool,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The first executable called `name` on PATH, then in the sbin folders (which a non-login
/// PATH may lack).
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
