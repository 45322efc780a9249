//! The farm's real HTTP servers: Python servers from PyPI (one process each, through
//! `tests/smuggle/servers/pyfarm.py`), Go's net/http and Node.js's http (small programs beside
//! it), and nginx, Apache httpd and lighttpd from Debian as reverse proxies in front of an
//! in-process sink. Each logs every request it parsed completely; [`Server::replay`] sends one
//! recorded upstream stream and returns what the server parsed from it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

/// One request a server parsed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct Parsed {
    /// The method.
    pub method: String,
    /// The request target as the server read it.
    pub target: String,
    /// The `Host` header.
    pub host: String,
    /// Body bytes read.
    pub body_len: u64,
}

/// Where a server's parsed requests are found.
#[derive(Debug)]
enum Log {
    /// A JSON-lines file the server appends to.
    File(PathBuf),
    /// The in-process sink behind a reverse proxy.
    Sink(Arc<Mutex<Vec<Parsed>>>, tokio::task::JoinHandle<()>),
}

/// One running server of the farm.
#[derive(Debug)]
pub struct Server {
    /// Its name in the result table (`nginx`, `gunicorn`, `go-net-http`, ...).
    pub name: String,
    /// Its version, as the package reports it.
    pub version: String,
    port: u16,
    log: Log,
    _child: Child,
}

/// Where the farm's tools are.
#[derive(Clone, Debug)]
pub struct Tools {
    /// The Python venv holding the PyPI servers.
    pub venv: PathBuf,
    /// The built `gofarm` program.
    pub go_server: PathBuf,
    /// `tests/smuggle/servers`.
    pub scripts: PathBuf,
    /// A scratch directory for configs and logs.
    pub work: PathBuf,
}

/// The Python servers: (farm name, `pyfarm.py` kind, PyPI distribution for the version).
const PYTHON: &[(&str, &str, &str)] = &[
    ("gunicorn", "gunicorn", "gunicorn"),
    ("waitress", "waitress", "waitress"),
    ("cheroot", "cheroot", "cheroot"),
    ("uvicorn-h11", "uvicorn-h11", "h11"),
    ("uvicorn-httptools", "uvicorn-httptools", "httptools"),
    ("hypercorn", "hypercorn", "hypercorn"),
    ("aiohttp", "aiohttp", "aiohttp"),
    ("tornado", "tornado", "tornado"),
    ("twisted", "twisted", "twisted"),
];

// === impl Tools ===

impl Tools {
    /// The tools named by `FLEETGATE_FARM_VENV` and `FLEETGATE_FARM_GO` (set by `tests/run`),
    /// or `None` when they are not installed.
    pub fn from_env(work: &Path) -> Option<Self> {
        let venv = PathBuf::from(std::env::var_os("FLEETGATE_FARM_VENV")?);
        let go_server = PathBuf::from(std::env::var_os("FLEETGATE_FARM_GO")?);
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("smuggle/servers");
        Some(Self {
            venv,
            go_server,
            scripts,
            work: work.to_path_buf(),
        })
    }
}

/// Start every server of the farm; fails when one does not come up.
pub async fn start_all(tools: &Tools) -> anyhow::Result<Vec<Server>> {
    let mut starting = Vec::new();
    for (name, kind, dist) in PYTHON {
        starting.push(tokio::spawn(start_python(tools.clone(), name, kind, dist)));
    }
    starting.push(tokio::spawn(start_go(tools.clone())));
    starting.push(tokio::spawn(start_node(tools.clone())));
    for front in ["nginx", "apache2", "lighttpd"] {
        starting.push(tokio::spawn(start_front(tools.clone(), front)));
    }
    let mut servers = Vec::new();
    for s in starting {
        servers.push(s.await??);
    }
    Ok(servers)
}

/// A free loopback port no other server of this farm was given. The servers start at once and
/// each binds its port itself after this returns, so the kernel may hand the same released port
/// to two of them; then one fails to bind while the other answers for both.
async fn free_port() -> anyhow::Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").await?.local_addr()?.port();
        let mut given = GIVEN
            .lock()
            .map_err(|_| anyhow::anyhow!("the port list lock is poisoned"))?;
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
}

/// Run `cmd` and return its first output line (stdout, else stderr).
async fn version_of(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().await;
    out.ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

fn spawn(cmd: &mut Command, log: &Path) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log.with_extension("out"))?;
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("failed to start {cmd:?}"))
}

async fn wait_listening(name: &str, port: u16, log: &Path) -> anyhow::Result<()> {
    for _ in 0..300 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = std::fs::read_to_string(log.with_extension("out")).unwrap_or_default();
    bail!("{name} did not listen on {port} within 15 s:\n{out}")
}

async fn start_python(
    tools: Tools,
    name: &'static str,
    kind: &'static str,
    dist: &'static str,
) -> anyhow::Result<Server> {
    let port = free_port().await?;
    let log = tools.work.join(format!("{name}.log"));
    let python = tools.venv.join("bin/python");
    let child = spawn(
        Command::new(&python)
            .arg(tools.scripts.join("pyfarm.py"))
            .args([kind, &port.to_string()])
            .arg(&log),
        &log,
    )?;
    wait_listening(name, port, &log).await?;
    let script = format!("import importlib.metadata as m; print(m.version('{dist}'))");
    let version = version_of(&python.to_string_lossy(), &["-c", &script]).await;
    Ok(Server {
        name: name.to_string(),
        version: format!("{dist} {version}"),
        port,
        log: Log::File(log),
        _child: child,
    })
}

/// A server program taking `PORT LOG` as its last two arguments, after `leading`.
async fn start_program(
    tools: Tools,
    name: &'static str,
    program: PathBuf,
    leading: Vec<PathBuf>,
    version: String,
) -> anyhow::Result<Server> {
    let port = free_port().await?;
    let log = tools.work.join(format!("{name}.log"));
    let child = spawn(
        Command::new(&program)
            .args(&leading)
            .arg(port.to_string())
            .arg(&log),
        &log,
    )?;
    wait_listening(name, port, &log).await?;
    Ok(Server {
        name: name.into(),
        version,
        port,
        log: Log::File(log),
        _child: child,
    })
}

async fn start_go(tools: Tools) -> anyhow::Result<Server> {
    let (program, version) = (
        tools.go_server.clone(),
        version_of("go", &["version"]).await,
    );
    start_program(tools, "go-net-http", program, Vec::new(), version).await
}

async fn start_node(tools: Tools) -> anyhow::Result<Server> {
    let script = tools.scripts.join("nodefarm.js");
    let version = format!("node {}", version_of("node", &["--version"]).await);
    start_program(tools, "node-http", "node".into(), vec![script], version).await
}

/// A reverse proxy from Debian in front of an in-process sink that records what it forwards.
async fn start_front(tools: Tools, front: &'static str) -> anyhow::Result<Server> {
    let (sink_port, parsed, sink_task) = start_sink().await?;
    let port = free_port().await?;
    let dir = tools.work.join(front);
    std::fs::create_dir_all(&dir)?;
    // Run as root, the fronts drop to www-data before they open their logs.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tools.work, std::fs::Permissions::from_mode(0o755))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
    let log = dir.join("front.log");
    let conf = dir.join("front.conf");
    let d = dir.display();
    let (cmd, args, version) = match front {
        "nginx" => {
            std::fs::write(
                &conf,
                format!(
                    "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
                     events {{ worker_connections 512; }}\n\
                     http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
                     \x20 server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://127.0.0.1:{sink_port};\n      proxy_http_version 1.1;\n      proxy_set_header Host $http_host;\n      proxy_set_header Connection \"\";\n    }}\n  }}\n}}\n"
                ),
            )?;
            (
                "nginx",
                vec![
                    "-c".to_string(),
                    conf.display().to_string(),
                    "-p".into(),
                    d.to_string(),
                ],
                version_of("nginx", &["-v"]).await,
            )
        }
        "apache2" => {
            let m = "/usr/lib/apache2/modules";
            std::fs::write(
                &conf,
                format!(
                    "ServerRoot {d}\nServerName farm.test\nListen 127.0.0.1:{port}\nPidFile {d}/httpd.pid\nErrorLog {d}/error.log\nLogLevel crit\nMutex file:{d} default\nDefaultRuntimeDir {d}\n\
                     LoadModule mpm_event_module {m}/mod_mpm_event.so\nLoadModule authz_core_module {m}/mod_authz_core.so\n\
                     LoadModule proxy_module {m}/mod_proxy.so\nLoadModule proxy_http_module {m}/mod_proxy_http.so\n\
                     User www-data\nGroup www-data\nProxyPreserveHost On\nProxyPass / http://127.0.0.1:{sink_port}/ nocanon\n"
                ),
            )?;
            (
                "apache2",
                vec![
                    "-f".to_string(),
                    conf.display().to_string(),
                    "-DFOREGROUND".into(),
                ],
                version_of("apache2", &["-v"]).await,
            )
        }
        _ => {
            std::fs::write(
                &conf,
                format!(
                    "server.document-root = \"{d}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
                     server.pid-file = \"{d}/lighttpd.pid\"\nserver.errorlog = \"{d}/error.log\"\n\
                     server.username = \"www-data\"\nserver.groupname = \"www-data\"\n\
                     server.modules = (\"mod_proxy\")\nproxy.server = (\"\" => ((\"host\" => \"127.0.0.1\", \"port\" => {sink_port})))\n"
                ),
            )?;
            (
                "lighttpd",
                vec!["-D".to_string(), "-f".into(), conf.display().to_string()],
                version_of("lighttpd", &["-v"]).await,
            )
        }
    };
    let child = spawn(Command::new(cmd).args(&args), &log)?;
    wait_listening(front, port, &log).await?;
    Ok(Server {
        name: front.to_string(),
        version,
        port,
        log: Log::Sink(parsed, sink_task),
        _child: child,
    })
}

/// The sink behind a reverse proxy: hyper's server, recording each request it receives.
async fn start_sink() -> anyhow::Result<(u16, Arc<Mutex<Vec<Parsed>>>, tokio::task::JoinHandle<()>)>
{
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let parsed: Arc<Mutex<Vec<Parsed>>> = Arc::default();
    let seen = parsed.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        if let Ok(body) = body.collect().await {
                            let host = parts
                                .headers
                                .get(hyper::header::HOST)
                                .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
                                .unwrap_or_default();
                            let target = parts
                                .uri
                                .path_and_query()
                                .map(|p| p.as_str().to_string())
                                .unwrap_or_default();
                            seen.lock().unwrap_or_else(|e| e.into_inner()).push(Parsed {
                                method: parts.method.to_string(),
                                target,
                                host,
                                body_len: body.to_bytes().len() as u64,
                            });
                        }
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::from_static(b"ok"),
                        )))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((port, parsed, task))
}

// === impl Server ===

impl Server {
    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn parsed_count(&self) -> usize {
        match &self.log {
            Log::File(path) => std::fs::read(path)
                .map(|b| b.iter().filter(|c| **c == b'\n').count())
                .unwrap_or(0),
            Log::Sink(parsed, _) => parsed.lock().unwrap_or_else(|e| e.into_inner()).len(),
        }
    }

    fn parsed_from(&self, mark: usize) -> Vec<Parsed> {
        match &self.log {
            Log::File(path) => std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .skip(mark)
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
            Log::Sink(parsed, _) => {
                parsed.lock().unwrap_or_else(|e| e.into_inner())[mark..].to_vec()
            }
        }
    }

    /// Send `stream` on a fresh connection and return every request the server parsed from
    /// it: waits for `expect` requests (at most `wait`), then a short settle for any extra
    /// one, then resets the connection (so a request cut short is never completed by a close).
    pub async fn replay(&self, stream: &[u8], expect: usize, wait: Duration) -> Vec<Parsed> {
        let mark = self.parsed_count();
        let Ok(mut conn) = TcpStream::connect(self.addr()).await else {
            return Vec::new();
        };
        let _ = conn.write_all(stream).await;
        let until = tokio::time::Instant::now() + wait;
        let settle = Duration::from_millis(30);
        let mut settled_at = None;
        let mut answers = vec![0u8; 16 * 1024];
        let mut open = true;
        loop {
            let now = tokio::time::Instant::now();
            if settled_at.is_none() && (self.parsed_count() - mark >= expect || now >= until) {
                settled_at = Some(now + settle);
            }
            if settled_at.is_some_and(|at| now >= at) {
                break;
            }
            // Answers are read and dropped so the server never blocks on a full socket.
            tokio::select! {
                read = conn.read(&mut answers), if open => open = matches!(read, Ok(n) if n > 0),
                _ = tokio::time::sleep(Duration::from_millis(2)) => {}
            }
        }
        let _ = conn.set_zero_linger();
        drop(conn);
        self.parsed_from(mark)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Log::Sink(_, task) = &self.log {
            task.abort();
        }
    }
}
