//! The webhook's HTTPS listener: rustls (ring), `POST /mutate-pods` and `GET /live`, with the
//! certificate and key re-read when their files change (cert-manager or helm rotations).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use fleetgate_accept::Acceptor;
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kube::Api;
use kube::runtime::reflector::{self, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use prometheus::IntCounterVec;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::config::ConfigError;
use super::review::{PolicySource, review};
use super::{InjectorConfig, MUTATE_PATH};
use crate::crd::FleetPolicy;
use crate::metrics::Metrics;

/// Largest AdmissionReview body read (the API server caps objects at about 3 MiB).
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// How long one TLS handshake plus request may take.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(30);
/// How often the certificate files are checked for changes.
const CERT_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// Why the webhook cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A PEM file cannot be read or holds nothing usable.
    #[error("failed to load {what} from {path}: {message}")]
    Pem {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: String,
        /// The reason.
        message: String,
    },
    /// rustls refused the certificate, key or configuration.
    #[error("failed to build the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The injector configuration cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A flag the webhook needs is missing.
    #[error("failed to start the webhook: {0}")]
    Usage(&'static str),
    /// The listener cannot be bound.
    #[error("failed to bind the webhook listener {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A webhook ready to start: its address, certificate and injector configuration.
#[derive(Debug)]
pub struct Setup {
    addr: SocketAddr,
    certs: Arc<CertStore>,
    cfg: InjectorConfig,
    /// Set while the FleetPolicy reflector has synced and the listener serves.
    serving: Arc<AtomicBool>,
}

/// The serving certificate, re-read from its files when they change.
#[derive(Debug)]
pub struct CertStore {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<(Arc<CertifiedKey>, Option<SystemTime>)>,
}

/// What the request handler shares.
struct Handler {
    cfg: InjectorConfig,
    source: Arc<dyn PolicySource>,
    /// `fleetgate_controller_webhook_reviews_total`, when metrics are on.
    reviews: Option<IntCounterVec>,
}

// === impl CertStore ===

impl CertStore {
    /// Load the certificate chain and key (PEM) from their files.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Self, ServerError> {
        let key = load_key(cert_path, key_path)?;
        Ok(Self {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            current: RwLock::new((key, modified(cert_path, key_path))),
        })
    }

    /// Re-read the files when their modification time changed; a broken pair keeps the old
    /// certificate. Returns whether a new certificate was installed.
    pub fn reload_if_changed(&self) -> Result<bool, ServerError> {
        let stamp = modified(&self.cert_path, &self.key_path);
        let same = self.current.read().map(|c| c.1 == stamp).unwrap_or(false);
        if same {
            return Ok(false);
        }
        let key = load_key(&self.cert_path, &self.key_path)?;
        if let Ok(mut current) = self.current.write() {
            *current = (key, stamp);
        }
        Ok(true)
    }

    /// A rustls server configuration (ring, HTTP/1.1) serving this store's certificate.
    pub fn server_config(self: &Arc<Self>) -> Result<rustls::ServerConfig, ServerError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// A TLS acceptor serving this store's certificate.
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, ServerError> {
        Ok(TlsAcceptor::from(Arc::new(self.server_config()?)))
    }

    /// Check the files every `every` until the task is dropped.
    pub async fn watch(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            match self.reload_if_changed() {
                Ok(true) => info!(cert = %self.cert_path.display(), "webhook.cert_reloaded"),
                Ok(false) => {}
                Err(e) => warn!(error = %e, "webhook.cert_reload_failed"),
            }
        }
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.0.clone())
    }
}

fn modified(cert: &Path, key: &Path) -> Option<SystemTime> {
    let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    m(cert).max(m(key))
}

fn load_key(cert_path: &Path, key_path: &Path) -> Result<Arc<CertifiedKey>, ServerError> {
    let pem_err = |what, path: &Path, message: String| ServerError::Pem {
        what,
        path: path.display().to_string(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| pem_err("certificate", cert_path, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err("certificate", cert_path, e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_err(
            "certificate",
            cert_path,
            "no CERTIFICATE block".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| pem_err("key", key_path, e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(certs, key, &provider)?;
    Ok(Arc::new(certified))
}

// === impl Setup ===

impl Setup {
    /// The webhook of the `run` flags; `None` (webhook off) when no certificate is given.
    pub fn from_args(
        addr: SocketAddr,
        cert: Option<&Path>,
        key: Option<&Path>,
        injector_config: Option<&Path>,
    ) -> Result<Option<Self>, ServerError> {
        let Some(cert) = cert else {
            return Ok(None);
        };
        let key = key.ok_or(ServerError::Usage("--webhook-cert needs --webhook-key"))?;
        let cfg_path = injector_config.ok_or(ServerError::Usage(
            "--webhook-cert needs --injector-config (the file the chart renders)",
        ))?;
        let cfg = InjectorConfig::load(cfg_path)?;
        let certs = Arc::new(CertStore::load(cert, key)?);
        Ok(Some(Self {
            addr,
            certs,
            cfg,
            serving: Arc::default(),
        }))
    }

    /// True from the moment the webhook serves (certificate loaded, FleetPolicy reflector
    /// synced) until its reflector ends; `/ready` waits for it.
    pub fn serving(&self) -> Arc<AtomicBool> {
        self.serving.clone()
    }

    /// Bind the listener, start the FleetPolicy reflector (in `namespace`, or every namespace)
    /// and serve once it has synced; the task runs until aborted.
    pub async fn spawn(
        self,
        client: kube::Client,
        namespace: Option<&str>,
        metrics: Option<Metrics>,
        baselines: Option<crate::cluster_baselines::ClusterBaselines>,
    ) -> Result<JoinHandle<()>, ServerError> {
        let acceptor = self.certs.acceptor()?;
        let listener = TcpListener::bind(self.addr)
            .await
            .map_err(|source| ServerError::Bind {
                addr: self.addr,
                source,
            })?;
        let api: Api<FleetPolicy> = match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        };
        let (reader, writer) = reflector::store();
        // The webhook reads a FleetPolicy's name, namespace and spec: its status and managed
        // fields stay out of the store (the controller's own store keeps the status).
        let stream = watcher(api, watcher::Config::default()).modify(|fp| {
            fp.status = None;
            fp.metadata.managed_fields = None;
        });
        let events = reflector(writer, stream)
            .backoff(crate::watch_backoff::WatchBackoff::default())
            .applied_objects()
            .for_each(|_| std::future::ready(()));
        let (certs, cfg, addr, serving) = (self.certs, self.cfg, self.addr, self.serving);
        let flag = serving.clone();
        Ok(tokio::spawn(async move {
            let run = async move {
                // Until the store has synced every pod would be refused for lack of a policy.
                if reader.wait_until_ready().await.is_err() {
                    return;
                }
                // Nor before the baselines are known: a pod would miss their egress floor.
                let source: Arc<dyn PolicySource> = match baselines {
                    None => Arc::new(reader),
                    Some(baselines) => {
                        while baselines.current().is_none() {
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                        Arc::new(super::egress_floor::EgressFloor {
                            policies: reader,
                            baselines,
                        })
                    }
                };
                info!(%addr, "webhook.listening");
                flag.store(true, Ordering::Relaxed);
                tokio::spawn(certs.watch(CERT_CHECK_INTERVAL));
                serve(listener, acceptor, cfg, source, metrics).await;
            };
            tokio::select! {
                () = events => warn!("webhook.reflector_ended"),
                () = run => {}
            }
            serving.store(false, Ordering::Relaxed);
        }))
    }
}

/// Serve the webhook on `listener` until the task is dropped.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    cfg: InjectorConfig,
    source: Arc<dyn PolicySource>,
    metrics: Option<Metrics>,
) {
    let handler = Arc::new(Handler {
        cfg,
        source,
        reviews: metrics.as_ref().map(|m| m.webhook_reviews.clone()),
    });
    let mut accepting = Acceptor::new("webhook", metrics.map(|m| m.accept_errors));
    loop {
        let (stream, peer) = accepting.accept(&listener).await;
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        tokio::spawn(async move {
            let served = tokio::time::timeout(CONNECTION_DEADLINE, async move {
                let tls = acceptor.accept(stream).await?;
                let service = service_fn(move |req| {
                    let handler = handler.clone();
                    async move { Ok::<_, Infallible>(route(&handler, req).await) }
                });
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await
                    .map_err(std::io::Error::other)
            })
            .await;
            match served {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!(%peer, error = %e, "webhook.connection_failed"),
                Err(_) => debug!(%peer, "webhook.connection_timed_out"),
            }
        });
    }
}

async fn route(handler: &Handler, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match (req.method().as_str(), req.uri().path()) {
        ("GET", "/live") => respond(StatusCode::OK, "text/plain", b"live\n".to_vec()),
        ("POST", MUTATE_PATH) => {
            let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
            {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    let msg = format!("failed to read the request body: {e}\n");
                    return respond(StatusCode::BAD_REQUEST, "text/plain", msg.into_bytes());
                }
            };
            let reviewed = review(&body, handler.source.as_ref(), &handler.cfg);
            info!(outcome = reviewed.outcome, detail = %reviewed.detail, "webhook.review");
            if let Some(reviews) = &handler.reviews {
                reviews.with_label_values(&[reviewed.outcome]).inc();
            }
            let status = StatusCode::from_u16(reviewed.status).unwrap_or(StatusCode::OK);
            respond(status, "application/json", reviewed.body)
        }
        (_, path) => respond(
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("no webhook endpoint {path}; POST {MUTATE_PATH}\n").into_bytes(),
        ),
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    resp
}
