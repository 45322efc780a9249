//! The relay's HTTP/1.1 framing: request heads and chunked bodies from arbitrary bytes. Never
//! panics; a chunked body that decodes re-encodes to canonical chunks that decode to the same
//! data, fed in one piece or split anywhere; and the canonical form is a fixed point.

#![no_main]

use bytes::BytesMut;
use fleetgate_proxy::egress::relay::h1::{ChunkedDecoder, Encode, Head};
use libfuzzer_sys::fuzz_target;

fn decode(input: &[u8], encode: Encode) -> Option<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let d = ChunkedDecoder::default().decode(input, &mut out, encode).ok()?;
    d.done.then_some((out, d.consumed))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(head)) = Head::parse_request(&mut BytesMut::from(data)) {
        if let Ok(framing) = head.request_framing() {
            let _ = head.check_request(framing);
        }
    }
    let Some((canonical, consumed)) = decode(data, Encode::Chunked) else {
        return;
    };
    let (plain, _) = decode(data, Encode::Identity).expect("the same body decodes as identity");
    // Canonical chunks decode to the same data and are their own canonical form.
    let (again, used) = decode(&canonical, Encode::Chunked).expect("canonical chunks decode");
    assert_eq!(used, canonical.len(), "canonical output is exactly one body");
    assert_eq!(again, canonical, "the canonical form is a fixed point");
    let (plain_again, _) = decode(&canonical, Encode::Identity).expect("decodes");
    assert_eq!(plain_again, plain, "re-framing keeps the data");
    // Split anywhere: the same data, the same end.
    let cut = data.len() % (consumed + 1);
    let mut dec = ChunkedDecoder::default();
    let mut out = Vec::new();
    let first = dec
        .decode(&data[..cut], &mut out, Encode::Identity)
        .expect("a prefix of a valid body is valid");
    let total = if first.done {
        first.consumed
    } else {
        let rest = dec
            .decode(&data[cut..], &mut out, Encode::Identity)
            .expect("the rest of a valid body is valid");
        assert!(rest.done);
        cut + rest.consumed
    };
    assert_eq!(total, consumed);
    assert_eq!(out, plain);
});
