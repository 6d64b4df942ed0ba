//! The `.verbs` parser: text to [`Script`], with errors that name the line
//! and say what was expected.

use crate::literal::{is_ident, parse_addr, parse_gid, parse_hex, parse_int, split_ref};
use crate::schema::{self, Expects, Kind, Positionals, Spec};
use crate::script::{Arg, Expectation, Headers, Script, Statement};
use std::collections::BTreeSet;
use std::fmt;
use verbs_api::{errno, BackendKind, Capabilities};

/// Why a script could not be parsed: the file, the 1-based line, and what was
/// expected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file (as given to [`parse`]).
    pub path: String,
    /// The 1-based line.
    pub line: usize,
    /// What was wrong (`expected `=` after `let a``).
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Comparison operators of `assert`.
pub(crate) const ASSERT_OPS: &[&str] = &["==", "!=", "<", "<=", ">", ">="];

/// Parses a script. `path` is only used in messages and kept in [`Script::path`].
///
/// # Errors
/// The first problem found, with its line: an unknown header, statement,
/// argument key or errno; a malformed `let`, value or expectation; a name
/// used before any `let` bound it; a header after the first statement.
pub fn parse(path: &str, text: &str) -> Result<Script, ParseError> {
    let mut parser = Parser {
        path,
        line: 0,
        headers: Headers::default(),
        bound: BTreeSet::new(),
    };
    let mut statements = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        parser.line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix("#!") {
            if !statements.is_empty() {
                return Err(parser.err(format!(
                    "header `#!{}` after the first statement (headers come first)",
                    header.split(':').next().unwrap_or("").trim_end()
                )));
            }
            parser.header(header)?;
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        statements.push(parser.statement(strip_comment(trimmed))?);
    }
    Ok(Script {
        path: path.to_owned(),
        headers: parser.headers,
        statements,
    })
}

/// Drops a trailing `# comment` (a `#` at the start of a token).
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()) {
            return line[..i].trim_end();
        }
    }
    line
}

/// Splits a statement into tokens; `;` and a leading `->` are tokens of their own.
fn tokenize(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in line.split_whitespace() {
        let mut rest = word;
        if let Some(after) = rest.strip_prefix("->") {
            out.push("->".to_owned());
            rest = after;
        }
        let mut first = true;
        for piece in rest.split(';') {
            if !first {
                out.push(";".to_owned());
            }
            first = false;
            if !piece.is_empty() {
                out.push(piece.to_owned());
            }
        }
    }
    out
}

struct Parser<'a> {
    path: &'a str,
    line: usize,
    headers: Headers,
    /// Names bound by an earlier `let`.
    bound: BTreeSet<String>,
}

impl Parser<'_> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            path: self.path.to_owned(),
            line: self.line,
            message: message.into(),
        }
    }

    fn header(&mut self, text: &str) -> Result<(), ParseError> {
        let text = text.trim();
        let Some((key, value)) = text.split_once(':') else {
            return Err(self.err(format!("expected `:` after the header name in `#! {text}`")));
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "requires" => {
                for cap in value.split_whitespace() {
                    let known = Capabilities::NAMED
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(cap));
                    match known {
                        Some((_, c)) => self.headers.requires |= *c,
                        None => {
                            let names: Vec<&str> =
                                Capabilities::NAMED.iter().map(|(n, _)| *n).collect();
                            return Err(self.err(format!(
                                "unknown capability `{cap}` (known: {})",
                                names.join(" ")
                            )));
                        }
                    }
                }
            }
            "backends" => {
                for b in value.split_whitespace() {
                    match BackendKind::from_name(b) {
                        Some(kind) => self.headers.backends.push(kind),
                        None => {
                            return Err(self.err(format!("unknown backend `{b}` (known: sim hw)")))
                        }
                    }
                }
            }
            "seed" => {
                let seed = parse_int(value)
                    .and_then(|v| u64::try_from(v).ok())
                    .ok_or_else(|| {
                        self.err(format!(
                            "expected a seed (a number) after `#! seed:`, got `{value}`"
                        ))
                    })?;
                if self.headers.seed.is_some() {
                    return Err(self.err("`#! seed:` given twice"));
                }
                self.headers.seed = Some(seed);
            }
            "devices" => self
                .headers
                .devices
                .extend(value.split_whitespace().map(str::to_owned)),
            "description" => {
                let d = match self.headers.description.take() {
                    Some(prev) => format!("{prev} {value}"),
                    None => value.to_owned(),
                };
                self.headers.description = Some(d);
            }
            other => {
                let hint = schema::closest(
                    other,
                    ["requires", "backends", "seed", "devices", "description"].into_iter(),
                )
                .map(|c| format!(" (did you mean `#! {c}:`?)"))
                .unwrap_or_default();
                return Err(self.err(format!("unknown header `#! {other}`{hint}")));
            }
        }
        Ok(())
    }

    fn statement(&mut self, text: &str) -> Result<Statement, ParseError> {
        let tokens = tokenize(text);
        let mut pos = 0;
        let mut binding = None;
        if tokens[0] == "let" {
            let Some(name) = tokens.get(1) else {
                return Err(self.err("expected a name after `let`"));
            };
            if let Some((n, _)) = name.split_once('=') {
                return Err(self.err(format!(
                    "expected `=` after `let {n}` (separate it by spaces)"
                )));
            }
            if !is_ident(name) {
                return Err(self.err(format!(
                    "`{name}` is not a valid name (letters, digits and `_`, not starting with a digit)"
                )));
            }
            if tokens.get(2).map(String::as_str) != Some("=") {
                return Err(self.err(format!("expected `=` after `let {name}`")));
            }
            if tokens.get(3).is_none_or(|t| t == "->") {
                return Err(self.err(format!("expected a statement after `let {name} =`")));
            }
            binding = Some(name.clone());
            pos = 3;
        }
        let verb = tokens[pos].clone();
        pos += 1;
        if verb == "sim" {
            return self.sim_statement(binding, &tokens[pos..]);
        }
        let Some(spec) = schema::lookup(&verb) else {
            let hint = schema::closest(&verb, schema::SPECS.iter().map(|s| s.name).chain(["sim"]))
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            return Err(self.err(format!("unknown statement `{verb}`{hint}")));
        };
        let arrow = tokens[pos..]
            .iter()
            .position(|t| t == "->")
            .map(|i| i + pos);
        let arg_tokens = &tokens[pos..arrow.unwrap_or(tokens.len())];
        let args = self.args(spec, arg_tokens)?;
        self.check_positionals(spec, &args)?;
        let expect = match arrow {
            Some(a) => self.expectation(spec, &tokens[a + 1..])?,
            None => Expectation::Success,
        };
        if let Some(name) = &binding {
            self.bound.insert(name.clone());
        }
        Ok(Statement {
            line: self.line,
            binding,
            verb,
            args,
            expect,
        })
    }

    fn sim_statement(
        &mut self,
        binding: Option<String>,
        tokens: &[String],
    ) -> Result<Statement, ParseError> {
        let Some(sub) = tokens.first() else {
            let subs: Vec<&str> = schema::SIM_SPECS.iter().map(|s| s.name).collect();
            return Err(self.err(format!(
                "expected a directive after `sim` ({})",
                subs.join(" ")
            )));
        };
        let Some(spec) = schema::lookup_sim(sub) else {
            let hint = schema::closest(sub, schema::SIM_SPECS.iter().map(|s| s.name))
                .map(|c| format!(" (did you mean `sim {c}`?)"))
                .unwrap_or_default();
            return Err(self.err(format!("unknown sim directive `{sub}`{hint}")));
        };
        let arrow = tokens.iter().position(|t| t == "->");
        let rest = &tokens[1..arrow.unwrap_or(tokens.len())];
        let mut args = vec![Arg::Positional(sub.clone())];
        let parsed = self.args(spec, rest)?;
        if let Some(Arg::Positional(p)) = parsed.iter().find(|a| matches!(a, Arg::Positional(_))) {
            return Err(self.err(format!(
                "unexpected `{p}`: `sim {sub}` takes only key=value arguments"
            )));
        }
        args.extend(parsed);
        let expect = match arrow {
            Some(a) => self.expectation(spec, &tokens[a + 1..])?,
            None => Expectation::Success,
        };
        if let Some(name) = &binding {
            self.bound.insert(name.clone());
        }
        Ok(Statement {
            line: self.line,
            binding,
            verb: "sim".to_owned(),
            args,
            expect,
        })
    }

    fn args(&self, spec: &Spec, tokens: &[String]) -> Result<Vec<Arg>, ParseError> {
        let mut args = Vec::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for tok in tokens {
            if tok == ";" {
                if !spec.wr_list {
                    return Err(self.err(format!(
                        "`;` separates work requests and is only allowed in post_send, post_recv and post_srq_recv, not in {}",
                        spec.name
                    )));
                }
                seen.clear();
                args.push(Arg::Separator);
                continue;
            }
            let assert = matches!(spec.positionals, Positionals::Assert);
            match tok.split_once('=') {
                Some((key, value)) if !key.is_empty() && !assert => {
                    let Some(kind) = spec.key(key) else {
                        return Err(self.unknown_key(spec, key));
                    };
                    if value.is_empty() {
                        return Err(self.err(format!("expected a value after `{key}=`")));
                    }
                    let repeatable = spec.wr_list && (key == "sge" || key == "sge_raw");
                    if !repeatable && !seen.insert(key) {
                        return Err(self.err(format!("argument `{key}` given twice")));
                    }
                    self.check_value(key, value, kind)?;
                    args.push(Arg::Named {
                        key: key.to_owned(),
                        value: value.to_owned(),
                    });
                }
                _ => args.push(Arg::Positional(tok.clone())),
            }
        }
        Ok(args)
    }

    fn unknown_key(&self, spec: &Spec, key: &str) -> ParseError {
        let keys: Vec<&str> = spec
            .keys
            .iter()
            .flat_map(|g| g.iter().map(|(k, _)| *k))
            .collect();
        let hint = match schema::closest(key, keys.iter().copied()) {
            Some(c) => format!(" (did you mean `{c}`?)"),
            None if keys.is_empty() => " (it takes no key=value arguments)".to_owned(),
            None if keys.len() <= 12 => format!(" (expected one of: {})", keys.join(", ")),
            None => " (see docs/script-format.md)".to_owned(),
        };
        self.err(format!("unknown argument `{key}` for {}{hint}", spec.name))
    }

    /// A name or `name.field` whose root an earlier `let` bound.
    fn check_ref(&self, value: &str, what: &str) -> Result<(), ParseError> {
        match split_ref(value) {
            Some((root, _)) if self.bound.contains(root) => Ok(()),
            Some((root, _)) => Err(self.err(format!(
                "unknown name `{root}` in {what} (no earlier `let {root} = …`)"
            ))),
            None => Err(self.err(format!("expected a name in {what}, got `{value}`"))),
        }
    }

    fn is_bound_ref(&self, value: &str) -> bool {
        split_ref(value).is_some_and(|(root, _)| self.bound.contains(root))
    }

    fn check_int(&self, key: &str, value: &str) -> Result<(), ParseError> {
        if parse_int(value).is_some() {
            return Ok(());
        }
        if value.contains('.') || self.bound.contains(value) {
            return self.check_ref(value, &format!("`{key}={value}`"));
        }
        Err(self.err(format!("expected a number for `{key}`, got `{value}`")))
    }

    fn check_value(&self, key: &str, value: &str, kind: Kind) -> Result<(), ParseError> {
        match kind {
            Kind::Int => self.check_int(key, value),
            Kind::Name => {
                if value == "none" {
                    Ok(())
                } else {
                    self.check_ref(value, &format!("`{key}={value}`"))
                }
            }
            Kind::Enum(what, ok) | Kind::Flags(what, ok) => {
                if ok(value)
                    || parse_int(value).is_some()
                    || (value.contains('.') && self.is_bound_ref(value))
                {
                    Ok(())
                } else if value.contains('.') {
                    self.check_ref(value, &format!("`{key}={value}`"))
                } else {
                    Err(self.err(format!("`{value}` is not {what} (in `{key}={value}`)")))
                }
            }
            Kind::Gid => {
                if parse_gid(value).is_some() || self.is_bound_ref(value) {
                    Ok(())
                } else {
                    Err(self.err(format!(
                        "expected a GID (fe80::1 or 32 hex digits) for `{key}`, got `{value}`"
                    )))
                }
            }
            Kind::Sge => {
                let parts: Vec<&str> = value.split(':').collect();
                if parts.len() != 3 {
                    return Err(self.err(format!(
                        "expected `{key}=MR:OFFSET:LENGTH`, got `{key}={value}`"
                    )));
                }
                self.check_ref(parts[0], &format!("`{key}={value}`"))?;
                self.check_int(key, parts[1])?;
                self.check_int(key, parts[2])
            }
            Kind::SgeRaw => {
                let parts: Vec<&str> = value.split(':').collect();
                if parts.len() != 3 {
                    return Err(self.err(format!(
                        "expected `{key}=ADDR:LENGTH:LKEY`, got `{key}={value}`"
                    )));
                }
                parts.iter().try_for_each(|p| self.check_int(key, p))
            }
            Kind::Remote => {
                let parts: Vec<&str> = value.split(':').collect();
                if parts.len() != 2 {
                    return Err(
                        self.err(format!("expected `{key}=MR:OFFSET`, got `{key}={value}`"))
                    );
                }
                self.check_ref(parts[0], &format!("`{key}={value}`"))?;
                self.check_int(key, parts[1])
            }
            Kind::Hex => {
                if parse_hex(value).is_some() {
                    Ok(())
                } else {
                    Err(self.err(format!("expected hex bytes (an even number of hex digits) for `{key}`, got `{value}`")))
                }
            }
            Kind::Addr => {
                if parse_addr(value).is_some() {
                    Ok(())
                } else {
                    Err(self.err(format!(
                        "expected an address IP:PORT for `{key}`, got `{value}`"
                    )))
                }
            }
            Kind::Fd => {
                if value == "none" || value == "bad" || parse_int(value).is_some() {
                    Ok(())
                } else {
                    self.check_ref(
                        value,
                        &format!("`{key}={value}` (fd is none, bad or a number)"),
                    )
                }
            }
        }
    }

    fn check_positionals(&self, spec: &Spec, args: &[Arg]) -> Result<(), ParseError> {
        let words: Vec<&str> = args
            .iter()
            .filter_map(|a| match a {
                Arg::Positional(w) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        match spec.positionals {
            Positionals::Assert => {
                if words.len() != 3 || !ASSERT_OPS.contains(&words[1]) {
                    return Err(self.err(format!(
                        "expected `assert LEFT OP RIGHT` with OP one of {}",
                        ASSERT_OPS.join(" ")
                    )));
                }
                for side in [words[0], words[2]] {
                    if side.contains('.') && parse_int(side).is_none() && split_ref(side).is_some()
                    {
                        self.check_ref(side, &format!("`{side}`"))?;
                    }
                }
                Ok(())
            }
            Positionals::Names { roles, optional } => {
                let min = roles.len() - optional;
                if words.len() < min {
                    let missing = roles[words.len()];
                    return Err(self.err(format!("expected {missing} after {}", spec.name)));
                }
                if words.len() > roles.len() {
                    let extra = words[roles.len()];
                    let msg = if extra.contains('=') {
                        format!("unexpected `{extra}` after {}", spec.name)
                    } else if roles.is_empty() {
                        format!("{} takes no positional argument, got `{extra}` (arguments are key=value)", spec.name)
                    } else {
                        format!(
                            "{} takes {} positional argument{} ({}), got `{extra}` as well",
                            spec.name,
                            roles.len(),
                            if roles.len() == 1 { "" } else { "s" },
                            roles.join(" ")
                        )
                    };
                    return Err(self.err(msg));
                }
                for (w, role) in words.iter().zip(roles) {
                    self.check_ref(w, &format!("{} ({role})", spec.name))?;
                }
                Ok(())
            }
        }
    }

    fn expectation(&self, spec: &Spec, tokens: &[String]) -> Result<Expectation, ParseError> {
        let Some(first) = tokens.first() else {
            return Err(self.err("expected an expectation after `->` (ok, an errno name, error, empty, or key=value fields)"));
        };
        let first = first.as_str();
        if first == "ok" || first == "empty" {
            if let Some(extra) = tokens.get(1) {
                return Err(self.err(format!("unexpected `{extra}` after `-> {first}`")));
            }
            if first == "ok" {
                return Ok(Expectation::Ok);
            }
            return match spec.expects {
                Expects::Fields(_) => Ok(Expectation::Empty),
                Expects::Plain => Err(self.err(format!(
                    "`-> empty` is not an expectation for {}",
                    spec.name
                ))),
            };
        }
        if !first.contains('=') {
            if first != "error" && errno::from_name(first).is_none() {
                return Err(self.err(format!(
                    "unknown errno `{first}` (expected ok, an errno name such as EINVAL, error, empty, or key=value fields)"
                )));
            }
            let mut bad_wr = None;
            for tok in &tokens[1..] {
                match tok.split_once('=') {
                    Some(("bad_wr", v)) if spec.wr_list => {
                        let n = parse_int(v)
                            .and_then(|n| usize::try_from(n).ok())
                            .ok_or_else(|| {
                                self.err(format!("expected a number after `bad_wr=`, got `{v}`"))
                            })?;
                        bad_wr = Some(n);
                    }
                    _ => {
                        return Err(self.err(format!(
                            "unexpected `{tok}` after `-> {first}`{}",
                            if spec.wr_list {
                                " (only bad_wr=N may follow)"
                            } else {
                                ""
                            }
                        )))
                    }
                }
            }
            if first == "error" {
                return Ok(Expectation::AnyError { bad_wr });
            }
            return Ok(Expectation::Error {
                errno: first.to_ascii_uppercase(),
                bad_wr,
            });
        }
        let Expects::Fields(keys) = spec.expects else {
            return Err(self.err(format!(
                "{} takes no field expectations (expected ok or an errno name after `->`, got `{first}`)",
                spec.name
            )));
        };
        let mut fields = Vec::new();
        for tok in tokens {
            let Some((key, value)) = tok
                .split_once('=')
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            else {
                return Err(self.err(format!("expected key=value after `->`, got `{tok}`")));
            };
            let Some((_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
                let names: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
                return Err(self.err(format!(
                    "unknown field `{key}` in the expectation of {} (expected one of: {})",
                    spec.name,
                    names.join(", ")
                )));
            };
            if fields.iter().any(|(k, _): &(String, String)| k == key) {
                return Err(self.err(format!("field `{key}` given twice after `->`")));
            }
            self.check_value(key, value, *kind)?;
            fields.push((key.to_owned(), value.to_owned()));
        }
        Ok(Expectation::Fields(fields))
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
