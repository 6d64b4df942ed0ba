//! Literal values of the script format: numbers, GIDs, hex byte strings,
//! socket addresses, and the `name.field` reference syntax.

use std::net::SocketAddr;
use verbs_api::Gid;

/// Parses a number: decimal, `0x` hex, optionally negative.
pub fn parse_int(s: &str) -> Option<i128> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let v = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        if hex.is_empty() {
            return None;
        }
        i128::from_str_radix(&hex.replace('_', ""), 16).ok()?
    } else {
        if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
            return None;
        }
        body.replace('_', "").parse::<i128>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Parses a GID: IPv6 notation (`fe80::1`, `::ffff:10.0.0.1`) or 32 hex digits.
pub fn parse_gid(s: &str) -> Option<Gid> {
    if s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        let bytes = parse_hex(s)?;
        let mut g = [0u8; 16];
        g.copy_from_slice(&bytes);
        return Some(Gid(g));
    }
    s.parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|a| Gid(a.octets()))
}

/// Parses hex bytes (`deadbeef`, optionally `0x`-prefixed; an even number of digits).
pub fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// Formats bytes as lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses `IP:PORT` (`10.0.0.1:7471`, `[fe80::1]:7471`).
pub fn parse_addr(s: &str) -> Option<SocketAddr> {
    s.parse().ok()
}

/// `true` for a valid binding name: a letter or `_`, then letters, digits, `_`.
pub fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits a reference `name.field.sub` into its root name and field path
/// (`("a", "cap.max_send_wr")`). Returns `None` unless the root is an identifier.
pub fn split_ref(s: &str) -> Option<(&str, &str)> {
    let (root, field) = match s.split_once('.') {
        Some((r, f)) => (r, f),
        None => (s, ""),
    };
    is_ident(root).then_some((root, field))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every literal form of the format parses; malformed ones do not.
    // Method: table of inputs and expected results.
    #[test]
    fn literals_parse_and_reject() {
        assert_eq!(parse_int("16"), Some(16));
        assert_eq!(parse_int("0x1234"), Some(0x1234));
        assert_eq!(parse_int("-1"), Some(-1));
        assert_eq!(parse_int("1_000"), Some(1000));
        assert_eq!(parse_int("0x"), None);
        assert_eq!(parse_int("12a"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_gid("fe80::1").map(|g| g.0[15]), Some(1));
        assert_eq!(
            parse_gid("fe800000000000000000000000000001").map(|g| g.0[0]),
            Some(0xfe)
        );
        assert_eq!(parse_gid("zz"), None);
        assert_eq!(parse_hex("deadbeef"), Some(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(parse_hex("abc"), None);
        assert_eq!(to_hex(&[0xab, 0x01]), "ab01");
        assert!(parse_addr("10.0.0.1:7471").is_some());
        assert!(parse_addr("[fe80::1]:7471").is_some());
        assert!(parse_addr("10.0.0.1").is_none());
        assert!(is_ident("m0") && is_ident("_x") && !is_ident("0m") && !is_ident("a-b"));
        assert_eq!(
            split_ref("a.cap.max_send_wr"),
            Some(("a", "cap.max_send_wr"))
        );
        assert_eq!(split_ref("pd"), Some(("pd", "")));
        assert_eq!(split_ref("1.5"), None);
    }
}
