//! What the gates need from one policy: the policy itself, the gate's resolver and the
//! compiled website blocklist. Built once per policy beside the web tools, and swapped with
//! them whole ([`crate::live::runtime::Runtime`]), so a request sees one policy from its first
//! gate to its last.

use crate::base::resolve::{self, GateResolver};
use crate::judge::gates::website_blocklist::{Blocklist, LoadWarning};
use crate::policy::Policy;

/// The gates' side of one validated policy.
#[derive(Debug)]
pub struct Rules {
    /// The policy this was built from.
    pub(crate) policy: Policy,
    /// The gate's own resolver.
    pub(crate) resolver: GateResolver,
    /// The compiled website blocklist.
    pub(crate) blocklist: Blocklist,
}

// === impl Rules ===

impl Rules {
    /// The rules of `policy`, and the blocklist's load warnings (a shared file missing or
    /// unreadable: the rest of the list still applies).
    pub(crate) fn build(policy: Policy) -> Result<(Self, Vec<LoadWarning>), resolve::BuildError> {
        let resolver = GateResolver::new(&policy.egress.resolver)?;
        let (blocklist, warnings) = Blocklist::load(
            policy.blocklist.enabled,
            &policy.blocklist.domains,
            &policy.blocklist.shared_files,
            std::path::Path::new("."),
        );
        Ok((
            Self {
                policy,
                resolver,
                blocklist,
            },
            warnings,
        ))
    }
}
