//! `TargetUrl` against the `url` crate on arbitrary input: whether the quick reading took the
//! URL or the parser did, every fact it answers (canonical form, scheme, port, host and its
//! kind, userinfo, `Host`, request target, Python's split of Hermes' form) is what the parser
//! says of Hermes' form of the input, and the canonical host of the input as given is the
//! parser's.
#![no_main]

use fleetgate_proxy::base::target_url::{HostKind, TargetUrl, canonical_host, canonical_host_of};
use fleetgate_proxy::base::url_form;
use libfuzzer_sys::fuzz_target;
use url::{Position, Url};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    assert_eq!(canonical_host_of(s), Url::parse(s).ok().as_ref().and_then(canonical_host), "{s:?}");
    let t = TargetUrl::new(s);
    let parsed = Url::parse(&t.normalized).ok();
    assert_eq!(t.canonical(), parsed.as_ref().map(Url::as_str), "{s:?}");
    let Some(url) = parsed else { return };
    assert_eq!(t.scheme(), Some(url.scheme()), "{s:?}");
    assert_eq!(t.port(), url.port_or_known_default(), "{s:?}");
    assert_eq!(t.host, canonical_host(&url), "{s:?}");
    let kind = url.host().map(|h| match h {
        url::Host::Domain(_) => HostKind::Domain,
        url::Host::Ipv4(ip) => HostKind::Ip(ip.into()),
        url::Host::Ipv6(ip) => HostKind::Ip(ip.into()),
    });
    assert_eq!(t.host_kind(), kind, "{s:?}");
    let userinfo = !url.username().is_empty() || url.password().is_some_and(|p| !p.is_empty());
    assert_eq!(t.has_userinfo(), userinfo, "{s:?}");
    assert_eq!(t.authority(), Some(&url[Position::BeforeHost..Position::AfterPort]), "{s:?}");
    assert_eq!(t.request_target(), Some(&url[Position::BeforePath..Position::AfterQuery]), "{s:?}");
    let parts = |p: &url_form::SplitUrl<'_>| {
        [p.scheme(), p.netloc(), p.path(), p.query(), p.fragment()].map(str::to_string)
    };
    let python = url_form::urlsplit(url_form::py_strip(&t.normalized)).ok();
    assert_eq!(t.split().as_ref().map(parts), python.as_ref().map(parts), "{s:?}");
});
