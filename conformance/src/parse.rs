//! The `.verbs` parser: text to [`Script`], with errors that name the line
//! and say what was expected.

use crate::literal::{
    is_ident, parse_addr, parse_expr, parse_gid, parse_hex, parse_int, split_ref, substitute, Expr,
};
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
        repeat_work: 0,
    };
    let mut statements = Vec::new();
    // Open `repeat` blocks, innermost last: each collects its lines until
    // its `}`; the outermost is expanded and parsed when it closes.
    let mut open: Vec<(Repeat, Vec<Raw>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        parser.line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix("#!") {
            let name = header.split(':').next().unwrap_or("").trim_end();
            if !open.is_empty() {
                return Err(parser.err(format!(
                    "header `#!{name}` inside a `repeat` block (headers come first)"
                )));
            }
            if !statements.is_empty() {
                return Err(parser.err(format!(
                    "header `#!{name}` after the first statement (headers come first)"
                )));
            }
            parser.header(header)?;
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        let line = strip_comment(trimmed);
        if line.split_whitespace().next() == Some("repeat") {
            let head = parser.repeat_head(line, &open)?;
            open.push((head, Vec::new()));
        } else if line == "}" {
            let Some((head, body)) = open.pop() else {
                return Err(parser.err(
                    "`}` without an open `repeat` block (a block starts with `repeat N {` or `repeat i in A..B {`)",
                ));
            };
            match open.last_mut() {
                Some((_, outer)) => outer.push(Raw::Repeat(head, body)),
                None => {
                    let mut lines = Vec::new();
                    parser.expand(&[Raw::Repeat(head, body)], &mut Vec::new(), &mut lines)?;
                    for (n, text, iteration) in lines {
                        parser.line = n;
                        let stmt = parser.statement(&text).map_err(|mut e| {
                            e.message
                                .push_str(&format!(" (in `repeat` iteration {iteration})"));
                            e
                        })?;
                        statements.push(stmt);
                    }
                }
            }
        } else if let Some((_, body)) = open.last_mut() {
            body.push(Raw::Line(parser.line, line.to_owned()));
        } else {
            statements.push(parser.statement(line)?);
        }
    }
    if let Some((head, _)) = open.last() {
        parser.line = head.line;
        return Err(parser.err(
            "`repeat` block not closed (expected a line with only `}` after its statements)",
        ));
    }
    Ok(Script {
        path: path.to_owned(),
        headers: parser.headers,
        statements,
    })
}

/// `i=3 j=0`: the repeat variables of one expanded line (a counted block
/// shows its iteration number alone).
fn iteration(env: &[(String, String)]) -> String {
    let vars: Vec<String> = env
        .iter()
        .map(|(k, v)| {
            if k.is_empty() {
                v.clone()
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    vars.join(" ")
}

/// Most statements (and iterations) one `repeat` block may expand to.
const REPEAT_STATEMENTS_MAX: usize = 1_000_000;

/// A line kept for a `repeat` block, expanded when the outermost block closes.
enum Raw {
    /// A statement line: its 1-based number and its text (comment stripped).
    Line(usize, String),
    /// A nested block.
    Repeat(Repeat, Vec<Self>),
}

/// `repeat N {` or `repeat VAR in A..B {`.
struct Repeat {
    /// The line of the `repeat`.
    line: usize,
    /// The loop variable, if any.
    var: Option<String>,
    /// The first value (`0` for `repeat N`), as written.
    from: String,
    /// The end, excluded, as written.
    to: String,
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
    /// Iterations run by the `repeat` blocks so far (bounded).
    repeat_work: usize,
}

impl Parser<'_> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            path: self.path.to_owned(),
            line: self.line,
            message: message.into(),
        }
    }

    /// Reads `repeat N {` / `repeat VAR in A..B {` (the bounds are
    /// evaluated when the outermost block is expanded).
    fn repeat_head(&self, line: &str, open: &[(Repeat, Vec<Raw>)]) -> Result<Repeat, ParseError> {
        const FORMS: &str = "`repeat N {` or `repeat i in A..B {`";
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.last() != Some(&"{") {
            return Err(self.err(format!(
                "expected `{{` at the end of the `repeat` line ({FORMS}, then the statements, then a line with only `}}`)"
            )));
        }
        match tokens[1..tokens.len() - 1] {
            [count] if count.contains("..") => Err(self.err(format!(
                "expected `repeat N {{` or `repeat i in A..B {{`, got `{line}` (a range needs a variable: `repeat i in {count} {{`)"
            ))),
            [count] => Ok(Repeat {
                line: self.line,
                var: None,
                from: "0".to_owned(),
                to: count.to_owned(),
            }),
            [var, "in", range] => {
                if !is_ident(var) {
                    return Err(self.err(format!(
                        "`{var}` is not a valid name for a repeat variable (letters, digits and `_`, not starting with a digit)"
                    )));
                }
                if self.bound.contains(var) {
                    return Err(self.err(format!(
                        "the repeat variable `{var}` is already bound by a `let` (choose another name)"
                    )));
                }
                if open.iter().any(|(r, _)| r.var.as_deref() == Some(var)) {
                    return Err(self.err(format!(
                        "the repeat variable `{var}` is already the variable of an enclosing `repeat` (choose another name)"
                    )));
                }
                let Some((from, to)) = range.split_once("..") else {
                    return Err(self.err(format!(
                        "expected a range A..B after `repeat {var} in`, got `{range}` (B is excluded: 0..3 is 0, 1, 2)"
                    )));
                };
                Ok(Repeat {
                    line: self.line,
                    var: Some(var.to_owned()),
                    from: from.to_owned(),
                    to: to.to_owned(),
                })
            }
            _ => Err(self.err(format!("expected {FORMS}, got `{line}`"))),
        }
    }

    /// A bound of a `repeat` (enclosing variables already replaced): a
    /// number or arithmetic on numbers.
    fn repeat_bound(&self, text: &str) -> Result<i128, ParseError> {
        let hint = "a number, or arithmetic on numbers and enclosing repeat variables";
        if let Some(v) = parse_int(text) {
            return Ok(v);
        }
        let expr = parse_expr(text)
            .ok_or_else(|| self.err(format!("expected {hint} as a repeat bound, got `{text}`")))?;
        expr.eval(|r| -> Result<i128, String> {
            Err(format!(
                "`{r}` in a repeat bound is not known when the script is read ({hint})"
            ))
        })
        .map_err(|m| self.err(m))
    }

    /// Expands `items` with the enclosing repeat variables `env` into
    /// `(line, text, iteration)` statement lines.
    fn expand(
        &mut self,
        items: &[Raw],
        env: &mut Vec<(String, String)>,
        out: &mut Vec<(usize, String, String)>,
    ) -> Result<(), ParseError> {
        for item in items {
            match item {
                Raw::Line(n, text) => {
                    let mut words = text.split_whitespace();
                    if let (Some("let"), Some(name)) = (words.next(), words.next()) {
                        if env.iter().any(|(k, _)| k == name) {
                            self.line = *n;
                            return Err(self.err(format!(
                                "`let {name}` inside `repeat {name} …`: `{name}` is the repeat variable (choose another name)"
                            )));
                        }
                    }
                    let text = env
                        .iter()
                        .fold(text.clone(), |t, (k, v)| substitute(&t, k, v));
                    out.push((*n, text, iteration(env)));
                }
                Raw::Repeat(head, body) => {
                    self.line = head.line;
                    let subst = |t: &str| {
                        env.iter()
                            .fold(t.to_owned(), |t, (k, v)| substitute(&t, k, v))
                    };
                    let from = self.repeat_bound(&subst(&head.from))?;
                    let to = self.repeat_bound(&subst(&head.to))?;
                    if to < from {
                        return Err(self.err(format!(
                            "the repeat range {from}..{to} runs backwards (B is excluded; write A..B with A <= B)"
                        )));
                    }
                    self.repeat_work = self
                        .repeat_work
                        .saturating_add(usize::try_from(to - from).unwrap_or(usize::MAX));
                    if self.repeat_work > REPEAT_STATEMENTS_MAX {
                        return Err(self.err(format!(
                            "`repeat` runs more than {REPEAT_STATEMENTS_MAX} iterations in all (use fewer)"
                        )));
                    }
                    for v in from..to {
                        if out.len() + body.len() > REPEAT_STATEMENTS_MAX {
                            self.line = head.line;
                            return Err(self.err(format!(
                                "this `repeat` expands to more than {REPEAT_STATEMENTS_MAX} statements (use fewer iterations)"
                            )));
                        }
                        match &head.var {
                            Some(var) => {
                                env.push((var.clone(), v.to_string()));
                                let r = self.expand(body, env, out);
                                env.pop();
                                r?;
                            }
                            None => {
                                // A counted block: no variable, but name the
                                // iteration in errors.
                                env.push((String::new(), v.to_string()));
                                let r = self.expand(body, env, out);
                                env.pop();
                                r?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
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
            "sim" => {
                for pair in value.split_whitespace() {
                    match pair.split_once('=') {
                        Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                            self.headers.sim.push((k.to_owned(), v.to_owned()));
                        }
                        _ => {
                            return Err(self
                                .err(format!("expected `name=value` in `#! sim:`, got `{pair}`")))
                        }
                    }
                }
            }
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
                    [
                        "requires",
                        "backends",
                        "seed",
                        "devices",
                        "sim",
                        "description",
                    ]
                    .into_iter(),
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
        if let (Some(name), Expectation::AnyOrder { .. }) = (&binding, &expect) {
            return Err(self.err(format!(
                "`let {name} =` cannot bind `-> any` (it reaps several completions; poll them one by one to bind one)"
            )));
        }
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

    /// Every reference of an arithmetic value was bound by an earlier `let`.
    fn check_expr(&self, expr: &Expr<'_>, what: &str) -> Result<(), ParseError> {
        for r in expr.refs() {
            self.check_ref(r, what).map_err(|mut e| {
                e.message.push_str(
                    " (arithmetic takes numbers, `name.field` references and repeat variables)",
                );
                e
            })?;
        }
        Ok(())
    }

    fn is_bound_ref(&self, value: &str) -> bool {
        split_ref(value).is_some_and(|(root, _)| self.bound.contains(root))
    }

    fn check_int(&self, key: &str, value: &str) -> Result<(), ParseError> {
        if parse_int(value).is_some() {
            return Ok(());
        }
        if let Some(expr) = parse_expr(value) {
            return self.check_expr(&expr, &format!("`{key}={value}`"));
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
                if let Some(expr) = parse_expr(value) {
                    return self.check_expr(&expr, &format!("`{key}={value}`"));
                }
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
                    if let Some(expr) = parse_expr(side) {
                        self.check_expr(&expr, &format!("`{side}`"))?;
                    } else if side.contains('.')
                        && parse_int(side).is_none()
                        && split_ref(side).is_some()
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
        if first == "any" {
            return self.any_order(spec, &tokens[1..]);
        }
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
        Ok(Expectation::Fields(self.fields(spec, keys, tokens, false)?))
    }

    /// `-> any wr_id=LIST [key=value…]` of `poll_cq`.
    fn any_order(&self, spec: &Spec, tokens: &[String]) -> Result<Expectation, ParseError> {
        let form = "`-> any wr_id=1,2,3 [key=value…]`";
        let Expects::Fields(keys) = spec.expects else {
            return Err(self.err(format!("{form} is only for poll_cq, not {}", spec.name)));
        };
        if !matches!(spec.name, "poll_cq" | "poll") {
            return Err(self.err(format!("{form} is only for poll_cq, not {}", spec.name)));
        }
        let mut fields = self.fields(spec, keys, tokens, true)?;
        let Some(at) = fields.iter().position(|(k, _)| k == "wr_id") else {
            return Err(self.err(format!(
                "expected the work requests after `-> any`: {form} (ranges too: wr_id=0..100)"
            )));
        };
        let (_, list) = fields.remove(at);
        let mut wr_ids = Vec::new();
        for item in list.split(',') {
            if item.is_empty() {
                return Err(self.err(format!(
                    "empty item in `wr_id={list}` (separate the work requests by `,` with no spaces)"
                )));
            }
            match item.split_once("..") {
                Some((a, b)) => {
                    self.check_int("wr_id", a)?;
                    self.check_int("wr_id", b)?;
                }
                None => self.check_int("wr_id", item)?,
            }
            wr_ids.push(item.to_owned());
        }
        Ok(Expectation::AnyOrder { wr_ids, fields })
    }

    /// The `key=value` fields of an expectation. For fields that are not
    /// flag sets, `A|B` means either value (`status=REM_ACCESS_ERR|RETRY_EXC_ERR`).
    fn fields(
        &self,
        spec: &Spec,
        keys: &[(&str, Kind)],
        tokens: &[String],
        any: bool,
    ) -> Result<Vec<(String, String)>, ParseError> {
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
            if key == "wr_id" && any {
                // The list of `-> any`, checked by the caller.
            } else if key == "wr_id" && (value.contains(',') || value.contains("..")) {
                return Err(self.err(format!(
                    "`wr_id={value}` names several work requests: write `-> any wr_id={value}` to reap them in any order"
                )));
            } else if value.contains('|') && !matches!(kind, Kind::Flags(..)) {
                for alt in value.split('|') {
                    if alt.is_empty() {
                        return Err(self.err(format!(
                            "empty alternative in `{key}={value}` (write `{key}=A|B`: either value matches)"
                        )));
                    }
                    self.check_value(key, alt, *kind)?;
                }
            } else {
                self.check_value(key, value, *kind)?;
            }
            fields.push((key.to_owned(), value.to_owned()));
        }
        Ok(fields)
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
