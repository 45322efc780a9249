//! fleetgate-e2e: harness shared by the cross-component tests (spawning the gate, loopback
//! origins, the stub DNS server, the Python venv with Hermes).
//!
//! Every server binds `127.0.0.1` port 0 and stops when its handle drops, so tests run in
//! parallel without fixed ports or leftover processes:
//!
//! - [`dns::StubDns`]: scripted DNS answers over UDP and TCP, with per-name query counters.
//! - [`origin::Origin`]: an HTTP/1.1 origin with per-path replies (pages, redirects, encoded
//!   bodies, hangs, stalls, short bodies), hit counters and recorded requests.
//! - [`gate::GateProcess`]: the real `fleetgate-proxy` binary, its listeners and its log lines.
//! - [`llm_stub::StubProvider`]: stub OpenAI-compatible and Anthropic providers (SSE or whole).
//! - [`http`]: a minimal loopback HTTP/1.1 client for talking to the gate and origins.
//! - [`pages`]: test pages shaped like real ones (a news page with all its boilerplate).
//! - [`venv`]: the Python venv with the real Hermes Agent, or a clear skip when it is absent.
//! - [`farm`]: the smuggling farm (payload corpus, recording origin, real servers, replay).
//! - [`k8s`]: a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager)
//!   on loopback, built from source and started envtest-style; [`k8s::node`] adds a real node
//!   (kube-scheduler, kubelet, containerd and runc on a CNI bridge) where pods run.

#![warn(missing_docs)]

mod background;
pub mod dns;
pub mod farm;
pub mod gate;
pub mod http;
pub mod k8s;
pub mod llm_stub;
pub mod origin;
pub mod pages;
pub mod venv;
