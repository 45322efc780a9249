//! Everything built from one policy: the gates' [`Rules`] (resolver, compiled blocklist) and
//! the [`Web`] tools (store, cache, backends).
//!
//! A [`Runtime`] is immutable; a policy reload builds a new one and swaps it in whole, so a
//! request always sees one consistent policy from its first gate to its last. It reads as its
//! rules (`rt.policy`, `rt.resolver`, `rt.blocklist`: a runtime *is* the gates' rules plus
//! the web tools), and hands the web tools out as `rt.web`.

use std::ops::Deref;
use std::sync::Arc;
use std::time::SystemTime;

use crate::base::resolve;
use crate::judge::rules::Rules;
use crate::policy::Policy;
use crate::web::Web;

/// The live state derived from one validated policy.
#[derive(Debug)]
pub struct Runtime {
    /// What the gates need: the policy, the resolver, the blocklist.
    pub rules: Rules,
    /// The web tools: store, cache, search memo, `direct`, backends.
    pub web: Web,
    /// When this runtime was built.
    pub(crate) loaded_at: SystemTime,
    /// Problems that did not stop the load (missing shared blocklist files, ...).
    pub(crate) warnings: Vec<String>,
}

// === impl Runtime ===

impl Runtime {
    /// Build the runtime for `policy`.
    pub fn build(policy: Policy) -> Result<Arc<Self>, resolve::BuildError> {
        let (rules, load_warnings) = Rules::build(policy)?;
        let web = Web::build(&rules.policy);
        let mut warnings: Vec<String> = load_warnings.into_iter().map(|w| w.0).collect();
        warnings.extend(web.backends.warnings.iter().cloned());
        Ok(Arc::new(Self {
            rules,
            web,
            loaded_at: SystemTime::now(),
            warnings,
        }))
    }
}

impl Deref for Runtime {
    type Target = Rules;

    fn deref(&self) -> &Rules {
        &self.rules
    }
}
