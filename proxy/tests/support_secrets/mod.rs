//! The secret formats E1 is tested on (token formats outside Hermes' prefixes, JWTs), shared by
//! the URL gate's tests and the LLM route's prompt tests.
#![allow(dead_code)]

/// A deterministic string of `n` characters from `charset` (xorshift), so tokens are random
/// looking (they clear the entropy floors) and the test is reproducible.
pub fn random(charset: &str, n: usize, seed: u64) -> String {
    let chars: Vec<char> = charset.chars().collect();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chars[(x % chars.len() as u64) as usize]
        })
        .collect()
}

pub const HEX: &str = "0123456789abcdef";
pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const UPPER_DIGIT: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
pub const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub const BECH32: &str = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L";

/// A JWT with header `{"alg":"HS256","typ":"JWT"}`.
pub fn jwt(seed: u64) -> String {
    format!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.{}",
        random(B64URL, 43, seed)
    )
}

/// Tokens of formats Hermes' 56 prefixes miss, with the rule each must be refused by.
pub fn leak_material() -> Vec<(String, &'static str)> {
    vec![
        (
            format!("ASIA{}", random(UPPER_DIGIT, 16, 1)),
            "aws-access-key-id",
        ),
        (format!("shpat_{}", random(HEX, 32, 2)), "shopify-shpat"),
        (format!("shpss_{}", random(HEX, 32, 3)), "shopify-shpss"),
        (format!("SK{}", random(HEX, 32, 4)), "twilio-api-key"),
        (
            format!("dapi{}", random(HEX, 32, 5)),
            "databricks-api-token",
        ),
        (
            format!("PMAK-{}-{}", random(HEX, 24, 6), random(HEX, 34, 7)),
            "postman-api-key",
        ),
        (
            format!("lin_api_{}", random(ALNUM, 40, 8)),
            "linear-api-key",
        ),
        (
            format!("hvs.{}", random(B64URL, 95, 9)),
            "vault-service-token",
        ),
        (
            format!("sntryu_{}", random(HEX, 64, 10)),
            "sentry-user-token",
        ),
        (format!("pul-{}", random(HEX, 40, 11)), "pulumi-api-token"),
        (
            format!("glsa_{}_{}", random(ALNUM, 32, 12), random(HEX, 8, 13)),
            "grafana-service-account-token",
        ),
        (
            format!("AGE-SECRET-KEY-1{}", random(BECH32, 58, 14)),
            "age-secret-key",
        ),
        (
            format!("dp.pt.{}", random(ALNUM, 43, 15)),
            "doppler-pt-token",
        ),
        (
            format!("EAAA{}", random(B64URL, 60, 16)),
            "square-access-token",
        ),
        (
            format!("xoxe-1-{}", random(ALNUM, 150, 17)),
            "slack-refresh-token",
        ),
    ]
}
