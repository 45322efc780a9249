//! Differential conformance of the backend catalogue against the real Hermes in the test venv:
//! every web provider Hermes 0.19.0 registers exists in fleetgate under the same name, with the
//! same display name and capabilities, and extract through each search-only one gives Hermes'
//! typed text (fleetgate gives it when the policy loads, Hermes on the call).
//!
//! Backends Hermes 0.19.0 does not ship (keenable, perplexity, the keyless ring) follow the
//! newer Hermes sources the project's reference describes; they are covered by stub tests.

#![allow(clippy::expect_used, clippy::print_stdout)]

use std::process::Command;

use fleetgate_proxy::web::vendors::{BackendKind, check_extract_backend};
use serde_json::Value;

const DRIVER: &str = r#"
import asyncio, json, logging, os, sys, tempfile
logging.disable(logging.CRITICAL)
from tools.web_tools import _ensure_web_plugins_loaded, web_extract_tool
_ensure_web_plugins_loaded()
from agent.web_search_registry import list_providers
out = []
for p in list_providers():
    row = {"name": p.name, "display": p.display_name,
           "search": bool(p.supports_search()), "extract": bool(p.supports_extract())}
    if not row["extract"]:
        home = tempfile.mkdtemp()
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write("web:\n  backend: %s\n" % p.name)
        os.environ["HERMES_HOME"] = home
        # An IP literal: Hermes' SSRF check needs no DNS, and the call stops at resolution.
        row["extract_error"] = json.loads(asyncio.run(
            web_extract_tool(["https://93.184.215.14/page"])))["error"]
    out.append(row)
json.dump(out, sys.stdout)
"#;

#[test]
fn every_hermes_web_provider_has_fleetgates_name_display_name_capabilities_and_typed_error() {
    let Some(python) = fleetgate_e2e::venv::hermes_python() else {
        return;
    };
    let home = tempfile::tempdir().expect("a temp dir");
    let out = Command::new(python)
        .arg("-c")
        .arg(DRIVER)
        .env("HERMES_HOME", home.path())
        .env_remove("BRAVE_SEARCH_API_KEY")
        .env_remove("SEARXNG_URL")
        .output()
        .expect("the venv python must run");
    assert!(
        out.status.success(),
        "the Hermes driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let providers: Vec<Value> =
        serde_json::from_slice(&out.stdout).expect("the driver prints JSON");
    assert!(
        providers.len() >= 8,
        "Hermes 0.19.0 registers at least eight web providers: {providers:?}"
    );
    let mut search_only = 0;
    for p in &providers {
        let name = p["name"].as_str().expect("a name");
        let kind = BackendKind::from_name(name)
            .unwrap_or_else(|| panic!("Hermes provider '{name}' has no fleetgate backend"));
        assert_eq!(kind.display_name(), p["display"], "{name}: display name");
        let caps = kind.capabilities();
        assert_eq!(caps.search, p["search"], "{name}: search");
        assert_eq!(caps.extract, p["extract"], "{name}: extract");
        if let Some(hermes) = p["extract_error"].as_str() {
            search_only += 1;
            let ours = check_extract_backend(name).expect_err("a search-only backend is refused");
            assert_eq!(ours, format!("'{name}': {hermes}"), "{name}: typed text");
        }
    }
    assert!(
        search_only >= 4,
        "brave-free, ddgs, searxng and xai are search-only in Hermes: {providers:?}"
    );
}
