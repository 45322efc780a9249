//! The command line: `serve`, `check-policy`, `check-url`, `extract`, `convert`, `init-iptables`, `watch`.
//!
//! Exit codes: 0 success; 1 a URL was refused (`check-url`) or a command failed at run time;
//! 2 an invalid policy for the one-shot commands; 64 (`EX_USAGE`) an invalid policy for `serve`.

// Printing to stdout is this module's job: it is the command-line output.
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use crate::base::json_escape as escape;
use crate::judge::metrics::ProxyMetrics;
use crate::judge::telemetry;
use crate::live::runtime::Runtime;
use crate::policy::Policy;
use crate::web::pipeline::{ExtractOutcome, Pipeline, UrlCheck};
use crate::web::vendors::html::Scope as ContentScope;

/// fleetgate-proxy: the egress gate sidecar for Hermes Agents.
#[derive(Debug, Parser)]
#[command(name = "fleetgate-proxy", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gate's listeners until SIGTERM / Ctrl-C.
    Serve(ServeArgs),
    /// Validate a policy file and print what it configures.
    CheckPolicy {
        /// The policy file.
        file: PathBuf,
    },
    /// Run the URL gates (secret, SSRF, blocklist) on URLs without fetching; one JSON line each.
    CheckUrl {
        /// Policy file (default: the embedded default).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// URLs to check; `-` alone reads them from stdin, one per line (blank lines skipped),
        /// for lists longer than a command line.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Print the fleet report of a Hermes home (status, cron cost); read-only.
    Report(crate::report::cli::ReportArgs),
    /// Install (or `--cleanup`, or `--dry-run` print) the nat-table rules that redirect the
    /// pod's outbound TCP to the transparent listener. Needs NET_ADMIN and NET_RAW.
    InitIptables(fleetgate_iptables::Args),
    /// Run one watch of the policy once and print its output (new item lines or
    /// `{"wakeAgent": false}`).
    Watch(crate::watch::cli::WatchArgs),
    /// Run the extract pipeline once and print the JSON result.
    Extract {
        /// Policy file (default: the embedded default).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Character limit (2000..500000).
        #[arg(long)]
        char_limit: Option<u64>,
        /// The whole page instead of its main content (`direct` backend; overrides the
        /// policy's `web.onlyMainContent`).
        #[arg(long)]
        full_page: bool,
        /// URLs to extract (at most five are processed).
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Convert local files as the `direct` backend converts a fetched page (encoding
    /// sniffing, main content or whole page, markdown) and print one JSON line per file:
    /// `{"file", "title", "markdown", "micros", "error"}`. Fetches nothing.
    Convert {
        /// The whole page instead of its main content.
        #[arg(long)]
        full_page: bool,
        /// `Content-Type` the files are served with (default: sniffed, no charset).
        #[arg(long)]
        content_type: Option<String>,
        /// The URL the files were served from: relative link and image targets are resolved
        /// against it, as `extract` resolves them against the fetched page's (default: written
        /// as they are).
        #[arg(long)]
        base_url: Option<String>,
        /// Files to convert.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

pub(crate) use crate::app::ServeArgs;
use crate::app::{load_policy, print_policy_errors};

/// Run the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    let _log = telemetry::init(level);
    let serving = matches!(cli.command, Command::Serve(_));
    let rt = match async_runtime(serving) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match cli.command {
        Command::Serve(args) => {
            let code = rt.block_on(crate::app::serve(args));
            // `serve` has drained within its grace period; work still on the blocking pool (a
            // cache write on a hung volume) must not hold the exit past it.
            rt.shutdown_timeout(std::time::Duration::from_millis(500));
            code
        }
        Command::CheckPolicy { file } => check_policy(&file),
        Command::Report(args) => match crate::report::cli::run(&args) {
            Ok(out) => {
                println!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("fleetgate-proxy: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::InitIptables(args) => fleetgate_iptables::run(&args),
        Command::Watch(args) => rt.block_on(crate::watch::cli::run(&args)),
        Command::CheckUrl { policy, urls } => rt.block_on(check_url(policy.as_deref(), &urls)),
        Command::Extract {
            policy,
            char_limit,
            full_page,
            urls,
        } => rt.block_on(extract(policy.as_deref(), char_limit, full_page, &urls)),
        Command::Convert {
            full_page,
            content_type,
            base_url,
            files,
        } => convert(
            full_page,
            content_type.as_deref(),
            base_url.as_deref(),
            &files,
        ),
    }
}

/// The async runtime: for `serve`, a single-threaded runtime on this thread, the first of
/// the listeners' shards (`crate::base::shards`: every connection lives on one thread, with no
/// work stealing or wake-ups between workers; see `docs/benchmarks.md`); for the other
/// commands a worker per core.
fn async_runtime(serving: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if serving {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    builder.enable_all().build()
}

fn check_policy(file: &Path) -> ExitCode {
    match Policy::load(file) {
        Ok(p) => {
            let (list, warnings) = crate::judge::gates::website_blocklist::Blocklist::load(
                p.blocklist.enabled,
                &p.blocklist.domains,
                &p.blocklist.shared_files,
                Path::new("."),
            );
            for w in &warnings {
                eprintln!("warning: {}", w.0);
            }
            let summary = json!({
                "valid": true,
                "sha256": p.sha256,
                "extractBackend": p.web.extract_backend,
                "charLimit": p.web.char_limit,
                "blocklistRules": list.len(),
                "storeRoot": p.store.root,
                "listen": {"api": p.listen.api.to_string(), "admin": p.listen.admin.to_string()},
            });
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            print_policy_errors(Some(file), &e);
            ExitCode::from(2)
        }
    }
}

fn one_shot_runtime(path: Option<&Path>) -> Result<(Arc<Runtime>, ProxyMetrics), ExitCode> {
    let policy = load_policy(path).map_err(|e| {
        print_policy_errors(path, &e);
        ExitCode::from(2)
    })?;
    let runtime = Runtime::build(policy).map_err(|e| {
        eprintln!("fleetgate-proxy: {e}");
        ExitCode::from(1)
    })?;
    let metrics = ProxyMetrics::unregistered().map_err(|e| {
        eprintln!("fleetgate-proxy: failed to set up metrics: {e}");
        ExitCode::from(1)
    })?;
    Ok((runtime, metrics))
}

async fn check_url(path: Option<&Path>, urls: &[String]) -> ExitCode {
    let (runtime, metrics) = match one_shot_runtime(path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let pipeline = Pipeline::new(&runtime.rules, &runtime.web, &metrics);
    let mut lines = CheckLines::new();
    let mut unreadable = false;
    if let [only] = urls
        && only == "-"
    {
        unreadable = check_stdin_urls(&pipeline, &mut lines).await;
    } else {
        for url in urls {
            if !lines.check(&pipeline, url).await {
                break;
            }
        }
    }
    lines.flush();
    if unreadable {
        ExitCode::from(2)
    } else if lines.any_denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `check-url -`: one URL per stdin line (`\n` or `\r\n`), blank lines skipped. The output
/// goes out whenever the input has nothing more buffered, so a line typed at a terminal is
/// answered at once and a piped list is written in large chunks. A line that is not UTF-8 is
/// reported by its number on stderr (never its bytes: it may hold a secret) and not checked.
/// Returns whether some input could not be read.
async fn check_stdin_urls(pipeline: &Pipeline<'_>, lines: &mut CheckLines) -> bool {
    use std::io::BufRead as _;
    // Its own buffer over stdin, to see when the input has nothing more buffered (reads this
    // large bypass stdin's internal buffer).
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin());
    let mut line = Vec::new();
    let mut unreadable = false;
    for number in 1_u64.. {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("fleetgate-proxy: failed to read URLs from stdin: {e}");
                return true;
            }
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            eprintln!("fleetgate-proxy: stdin line {number} is not UTF-8; not checked");
            unreadable = true;
            continue;
        };
        let url = text.trim_end_matches('\n').trim_end_matches('\r');
        if url.trim().is_empty() {
            continue;
        }
        if !lines.check(pipeline, url).await || (input.buffer().is_empty() && !lines.flush()) {
            break;
        }
    }
    unreadable
}

/// `check-url`'s output: JSON lines gathered in one buffer and written out a chunk at a time
/// (stdout is line-buffered, so a write per URL would cost more than the decision itself).
struct CheckLines {
    stdout: std::io::StdoutLock<'static>,
    out: Vec<u8>,
    scratch: String,
    any_denied: bool,
}

impl CheckLines {
    fn new() -> Self {
        Self {
            stdout: std::io::stdout().lock(),
            out: Vec::with_capacity(CHECK_URL_BUFFER + 4096),
            scratch: String::new(),
            any_denied: false,
        }
    }

    /// Check `url` and queue its line; `false` once stdout is gone (a closed pipe: nobody
    /// reads the rest).
    async fn check(&mut self, pipeline: &Pipeline<'_>, url: &str) -> bool {
        let check = pipeline.check_url(url).await;
        self.any_denied |= check.refusal.is_some();
        write_check_line(&mut self.out, &check, &mut self.scratch);
        self.out.len() < CHECK_URL_BUFFER || self.flush()
    }

    /// Write out what is queued; `false` when stdout is gone.
    fn flush(&mut self) -> bool {
        let written = self
            .stdout
            .write_all(&self.out)
            .and_then(|()| self.stdout.flush());
        self.out.clear();
        written.is_ok()
    }
}

/// Bytes of `check-url` output gathered before one write to stdout.
const CHECK_URL_BUFFER: usize = 64 * 1024;

/// Appends `check` as one JSON line, `{"url","verdict","scope","code","message","addresses"}`,
/// byte for byte as serde_json writes that object, with no serialiser in between: strings go
/// through the response writer's escaper, the message is formatted into `scratch` (reused from
/// line to line), and an address is its `Display` form, which never needs an escape.
fn write_check_line(out: &mut Vec<u8>, check: &UrlCheck, scratch: &mut String) {
    use std::fmt::Write as _;
    out.extend_from_slice(b"{\"url\":");
    escape::write_str(out, &check.url);
    match &check.refusal {
        None => out.extend_from_slice(
            b",\"verdict\":\"allow\",\"scope\":null,\"code\":null,\"message\":null",
        ),
        Some(reason) => {
            out.extend_from_slice(b",\"verdict\":\"deny\",\"scope\":");
            escape::write_str(out, if reason.ends_call() { "call" } else { "item" });
            out.extend_from_slice(b",\"code\":");
            escape::write_str(out, reason.code());
            out.extend_from_slice(b",\"message\":");
            scratch.clear();
            // Writing into a String cannot fail.
            let _ = write!(scratch, "{reason}");
            escape::write_str(out, scratch);
        }
    }
    out.extend_from_slice(b",\"addresses\":[");
    for (i, addr) in check.addresses.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{addr}");
        out.push(b'"');
    }
    out.extend_from_slice(b"]}\n");
}

async fn extract(
    path: Option<&Path>,
    char_limit: Option<u64>,
    full_page: bool,
    urls: &[String],
) -> ExitCode {
    let (runtime, metrics) = match one_shot_runtime(path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let pipeline = Pipeline::new(&runtime.rules, &runtime.web, &metrics)
        .with_scope(full_page.then_some(ContentScope::Full));
    let urls = Value::from(urls.to_vec());
    let limit = char_limit.map(Value::from);
    let body = match pipeline.extract(&urls, limit.as_ref()).await {
        ExtractOutcome::Refused(r) => {
            json!({"success": false, "error": r.message(), "code": r.code()})
        }
        ExtractOutcome::Rows(rows) => json!({"results": rows}),
    };
    match serde_json::to_string_pretty(&body) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fleetgate-proxy: failed to serialise the result: {e}");
            ExitCode::from(1)
        }
    }
}

/// `convert`: each file through [`crate::web::vendors::direct::convert_body`], one JSON line each.
fn convert(
    full_page: bool,
    content_type: Option<&str>,
    base_url: Option<&str>,
    files: &[PathBuf],
) -> ExitCode {
    if let Some(base) = base_url
        && url::Url::parse(base).is_err()
    {
        eprintln!("fleetgate-proxy convert: --base-url {base:?} is not an absolute URL");
        return ExitCode::from(2);
    }
    use crate::web::vendors::direct::{Unconverted, convert_body};
    let scope = if full_page {
        ContentScope::Full
    } else {
        ContentScope::Main
    };
    let mut failed = false;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for file in files {
        let line = match std::fs::read(file) {
            Err(e) => {
                failed = true;
                json!({"file": file, "title": "", "markdown": "", "micros": 0,
                       "error": "read_failed", "message": e.to_string()})
            }
            Ok(body) => {
                let started = tokio::time::Instant::now();
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
                let result = convert_body(
                    content_type.map(str::to_string),
                    &body,
                    scope,
                    base_url,
                    deadline,
                );
                let micros = started.elapsed().as_micros() as u64;
                match result {
                    Ok(c) => json!({"file": file, "title": c.title, "markdown": c.content,
                                    "micros": micros, "error": null}),
                    Err(Unconverted::Failed(f)) => json!({"file": file, "title": "",
                        "markdown": "", "micros": micros, "error": f.code(),
                        "message": f.to_string()}),
                    Err(Unconverted::Late) => json!({"file": file, "title": "", "markdown": "",
                        "micros": micros, "error": "upstream_timeout"}),
                }
            }
        };
        if writeln!(out, "{line}").is_err() {
            return ExitCode::from(1);
        }
    }
    if out.flush().is_err() || failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests;
