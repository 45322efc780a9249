//! The first-bytes sniffer that decides, for transparent capture and CONNECT tunnels alike,
//! whether bytes are a TLS ClientHello, an HTTP/1 request head the relay accepts, or neither.
//! Never panics; a complete message is complete however it arrives (no prefix of it is
//! refused, so a client sending slowly is judged on the whole); a recognised head starts with
//! the byte its protocol announces; and a head the sniffer calls HTTP is one of the relay's
//! methods, read by the relay's own parser as the same method and target.

#![no_main]

use bytes::BytesMut;
use fleetgate_proxy::egress::relay::h1::{Head, METHODS};
use fleetgate_proxy::egress::relay::sniff::{Progress, Protocol, protocol_of, sniff};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Progress::Done(sniffed)) = sniff(data) else {
        return;
    };
    assert_eq!(protocol_of(data), Some(sniffed.protocol()), "the first byte announces it");
    // Every prefix of a complete message asks for more or is already complete.
    let cuts = [1, data.len() / 3, data.len() / 2, data.len().saturating_sub(1)];
    for cut in cuts.into_iter().filter(|&c| c < data.len()) {
        let prefix = sniff(&data[..cut]);
        assert!(
            matches!(prefix, Ok(Progress::NeedMore | Progress::Done(_))),
            "a prefix of an accepted message must not be refused: {prefix:?}"
        );
    }
    if sniffed.protocol() != Protocol::Http {
        return;
    }
    let method = data.split(|b| *b == b' ').next().unwrap_or_default();
    assert!(
        METHODS.iter().any(|m| m.as_bytes() == method),
        "only the relay's methods are HTTP"
    );
    if let Ok(Some(head)) = Head::parse_request(&mut BytesMut::from(data)) {
        assert_eq!(head.method().as_bytes(), method, "the relay reads the same method");
        let target = data.split(|b| *b == b' ').nth(1).unwrap_or_default();
        assert_eq!(head.target().as_bytes(), target, "the relay reads the same target");
    }
});
