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

/// One operand of an arithmetic value: a number or a reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand<'a> {
    /// A number literal (`16`, `0x10`).
    Int(i128),
    /// A binding or `name.field` reference (`m.addr`, `i`).
    Ref(&'a str),
}

/// An arithmetic operator of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
}

/// An arithmetic value `a.cap.max_send_wr+1`, `m.addr+8*i`: operands joined
/// by `+`, `-` and `*` (no spaces, no parentheses; `*` binds tighter than
/// `+` and `-`, which go left to right). Each operand may carry a unary `-`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr<'a> {
    /// The first operand and its sign (`true`: negated).
    pub first: (bool, Operand<'a>),
    /// The rest, each with the operator before it and its own sign.
    pub rest: Vec<(Op, bool, Operand<'a>)>,
}

/// Parses `s` as an arithmetic value with at least one operator, or `None`
/// (a plain number, a plain reference, or something else: a GID, an enum
/// name, `A|B`, `MR:OFF:LEN`). Operands are numbers or references
/// (`name`, `name.field`); whether a reference is bound is the caller's
/// question.
pub fn parse_expr(s: &str) -> Option<Expr<'_>> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let operand = |i: &mut usize| -> Option<(bool, Operand<'_>)> {
        let mut neg = false;
        if bytes.get(*i) == Some(&b'-') {
            neg = true;
            *i += 1;
        }
        let start = *i;
        while *i < bytes.len() && (bytes[*i].is_ascii_alphanumeric() || b"_.".contains(&bytes[*i]))
        {
            *i += 1;
        }
        let word = &s[start..*i];
        let op = if let Some(v) = parse_int(word) {
            Operand::Int(v)
        } else if split_ref(word).is_some() && !word.ends_with('.') && !word.contains("..") {
            Operand::Ref(word)
        } else {
            return None;
        };
        Some((neg, op))
    };
    let first = operand(&mut i)?;
    let mut rest = Vec::new();
    while i < bytes.len() {
        let op = match bytes[i] {
            b'+' => Op::Add,
            b'-' => Op::Sub,
            b'*' => Op::Mul,
            _ => return None,
        };
        i += 1;
        let (neg, operand) = operand(&mut i)?;
        rest.push((op, neg, operand));
    }
    (!rest.is_empty()).then_some(Expr { first, rest })
}

impl<'a> Expr<'a> {
    /// The references among the operands, in order.
    pub fn refs(&self) -> impl Iterator<Item = &'a str> + '_ {
        std::iter::once(&self.first.1)
            .chain(self.rest.iter().map(|(_, _, o)| o))
            .filter_map(|o| match o {
                Operand::Ref(r) => Some(*r),
                Operand::Int(_) => None,
            })
    }

    /// The value, with `resolve` giving each reference's number.
    ///
    /// # Errors
    /// What `resolve` returns, or an overflow of `i128`.
    pub fn eval<E: From<String>>(
        &self,
        mut resolve: impl FnMut(&str) -> Result<i128, E>,
    ) -> Result<i128, E> {
        let overflow = || E::from("arithmetic overflow".to_owned());
        let mut value = |neg: bool, o: &Operand<'_>| -> Result<i128, E> {
            let v = match o {
                Operand::Int(v) => *v,
                Operand::Ref(r) => resolve(r)?,
            };
            if neg {
                v.checked_neg().ok_or_else(overflow)
            } else {
                Ok(v)
            }
        };
        // Sum of products: `term` is the running product, `sum` the total
        // of the finished terms.
        let mut sum: i128 = 0;
        let mut term = value(self.first.0, &self.first.1)?;
        for (op, neg, o) in &self.rest {
            let v = value(*neg, o)?;
            match op {
                Op::Mul => term = term.checked_mul(v).ok_or_else(overflow)?,
                Op::Add => {
                    sum = sum.checked_add(term).ok_or_else(overflow)?;
                    term = v;
                }
                Op::Sub => {
                    sum = sum.checked_add(term).ok_or_else(overflow)?;
                    term = v.checked_neg().ok_or_else(overflow)?;
                }
            }
        }
        sum.checked_add(term).ok_or_else(overflow)
    }
}

/// Replaces every whole identifier `name` in `text` (not one after a `.`,
/// which is a field name) by `value`: how a `repeat` variable reaches the
/// statements of its block.
pub fn substitute(text: &str, name: &str, value: &str) -> String {
    let bytes = text.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if is_word(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_word(bytes[i]) {
                i += 1;
            }
            let word = &text[start..i];
            let after_dot =
                start > 0 && bytes[start - 1] == b'.' && !(start > 1 && bytes[start - 2] == b'.');
            if word == name && !after_dot {
                out.push_str(value);
            } else {
                out.push_str(word);
            }
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
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

    fn value(s: &str) -> Option<i128> {
        let e = parse_expr(s)?;
        e.eval(|r: &str| -> Result<i128, String> {
            match r {
                "i" => Ok(7),
                "m.addr" => Ok(0x1000),
                other => Err(format!("unbound {other}")),
            }
        })
        .ok()
    }

    // Goal: arithmetic values parse with `*` before `+`/`-`, left to right,
    // unary minus, references; plain values and other forms are not expressions.
    // Method: table of inputs and results, plus the forms that must stay plain.
    #[test]
    fn expressions_parse_and_evaluate() {
        assert_eq!(value("m.addr+1"), Some(0x1001));
        assert_eq!(value("1+2*3"), Some(7));
        assert_eq!(value("2*3-1"), Some(5));
        assert_eq!(value("10-3-2"), Some(5));
        assert_eq!(value("i*8+m.addr"), Some(0x1038));
        assert_eq!(value("5+-3"), Some(2));
        assert_eq!(value("-1+0x10"), Some(15));
        assert_eq!(value("x+1"), None, "unbound reference");
        for plain in [
            "16", "-1", "m.addr", "RTS", "A|B", "fe80::1", "m:0:8", "1+", "+1", "a..b+1", "1/2",
        ] {
            assert!(parse_expr(plain).is_none(), "{plain}");
        }
        assert_eq!(
            parse_expr("a.cap.max_send_wr+1").map(|e| e.refs().collect::<Vec<_>>()),
            Some(vec!["a.cap.max_send_wr"])
        );
        assert_eq!(
            substitute("wr_id=i sge=m:i*8:8", "i", "3"),
            "wr_id=3 sge=m:3*8:8"
        );
        assert_eq!(substitute("x=q.i+i+ii", "i", "3"), "x=q.i+3+ii");
        assert_eq!(
            substitute("repeat j in 0..i {", "i", "4"),
            "repeat j in 0..4 {"
        );
    }
}
