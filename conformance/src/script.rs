//! The syntax tree of a `.verbs` script (see `docs/script-format.md`).
//!
//! A [`Script`] is what [`crate::parse()`] returns and what
//! [`crate::run_script`] executes. Values stay text here: what a value means
//! (a number, an enum name, a binding's field) depends on the statement and
//! the key, and is decided when the statement runs. The parser has already
//! checked statement names, argument keys, enum and flag spellings and that
//! every name used was bound earlier.
//!
//! [`Script::to_text`] prints a script back in the format; the property tests
//! use it to print a shrunk failing sequence.

use std::fmt::Write as _;
use verbs_api::{BackendKind, Capabilities};

/// One parsed `.verbs` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    /// The file the script came from (as given to [`crate::parse()`]).
    pub path: String,
    /// The `#!` headers.
    pub headers: Headers,
    /// The statements, in file order.
    pub statements: Vec<Statement>,
}

/// The `#! key: value` headers of a script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    /// `#! requires:`: capabilities the backend must have (else SKIP).
    pub requires: Capabilities,
    /// `#! backends:`: the backends the script runs on (empty: all).
    pub backends: Vec<BackendKind>,
    /// `#! seed:`: the simulator's root seed (`None`: the default, 0).
    pub seed: Option<u64>,
    /// `#! devices:`: simulator device profile names, one per device (empty: the default).
    pub devices: Vec<String>,
    /// `#! sim:`: simulator divergence knobs as `name=value` pairs, in
    /// order (e.g. `cq_overrun=continue`; backend-sim's
    /// `SimConfig::set_option` knows the names). Other backends ignore them.
    pub sim: Vec<(String, String)>,
    /// `#! description:`: free text.
    pub description: Option<String>,
}

/// One statement: `[let NAME =] VERB ARGS… [-> EXPECTATION]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// 1-based line number in the file (0 for statements built in code).
    pub line: usize,
    /// `let NAME =`: the name the result is bound to.
    pub binding: Option<String>,
    /// The statement name (`modify_qp`, `poll_cq`, `sim`, …).
    pub verb: String,
    /// The arguments, in order.
    pub args: Vec<Arg>,
    /// What must happen.
    pub expect: Expectation,
}

/// One argument token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A bare word: a binding name (`pd`), a `name.field` reference, or for
    /// `assert` and `sim` an operand, operator or sub-command.
    Positional(String),
    /// `key=value`.
    Named {
        /// The key (a C field name, `sge`, `remote`, …).
        key: String,
        /// The value, as written.
        value: String,
    },
    /// `;`: separates work requests in a `post_*` statement.
    Separator,
}

/// The `-> …` part of a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// No `->`: the statement must succeed.
    Success,
    /// `-> ok`: the statement must succeed (explicit).
    Ok,
    /// `-> ENAME [bad_wr=N]`: the statement must fail with an error of that
    /// errno class (and, for `post_*`, first unposted request `N`).
    Error {
        /// The errno name as written (`EINVAL`), validated by the parser.
        errno: String,
        /// `bad_wr=N`.
        bad_wr: Option<usize>,
    },
    /// `-> error [bad_wr=N]`: the statement must fail, with an error of any
    /// errno class (for calls whose failure the spec gives no errno, such
    /// as `ibv_poll_cq` returning a negative value on an overrun CQ). A
    /// "not implemented" error still never matches.
    AnyError {
        /// `bad_wr=N` (`post_*` only).
        bad_wr: Option<usize>,
    },
    /// `-> empty`: nothing pending (`poll_cq`, `get_async_event`, `get_cq_event`, `rdma_get_cm_event`).
    Empty,
    /// `-> key=value…`: one completion / event whose fields match.
    Fields(Vec<(String, String)>),
    /// `-> any wr_id=1,2,3 [key=value…]` (`poll_cq`): one completion for
    /// each listed work request, in any order, each matching the other fields.
    AnyOrder {
        /// The `wr_id=` list as written, split at `,`: numbers, references,
        /// arithmetic values or ranges `A..B` (B excluded).
        wr_ids: Vec<String>,
        /// The other fields every completion must match.
        fields: Vec<(String, String)>,
    },
}

impl Statement {
    /// A statement with no arguments, no binding and [`Expectation::Success`].
    pub fn new(verb: impl Into<String>) -> Self {
        Self {
            line: 0,
            binding: None,
            verb: verb.into(),
            args: Vec::new(),
            expect: Expectation::Success,
        }
    }

    /// Prints the statement in the script format (one line, no newline).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(name) = &self.binding {
            let _ = write!(out, "let {name} = ");
        }
        out.push_str(&self.verb);
        for arg in &self.args {
            out.push(' ');
            match arg {
                Arg::Positional(word) => out.push_str(word),
                Arg::Named { key, value } => {
                    let _ = write!(out, "{key}={value}");
                }
                Arg::Separator => out.push(';'),
            }
        }
        match &self.expect {
            Expectation::Success => {}
            Expectation::Ok => out.push_str(" -> ok"),
            Expectation::Error { errno, bad_wr } => {
                let _ = write!(out, " -> {errno}");
                if let Some(i) = bad_wr {
                    let _ = write!(out, " bad_wr={i}");
                }
            }
            Expectation::AnyError { bad_wr } => {
                out.push_str(" -> error");
                if let Some(i) = bad_wr {
                    let _ = write!(out, " bad_wr={i}");
                }
            }
            Expectation::Empty => out.push_str(" -> empty"),
            Expectation::Fields(fields) => {
                out.push_str(" ->");
                for (k, v) in fields {
                    let _ = write!(out, " {k}={v}");
                }
            }
            Expectation::AnyOrder { wr_ids, fields } => {
                let _ = write!(out, " -> any wr_id={}", wr_ids.join(","));
                for (k, v) in fields {
                    let _ = write!(out, " {k}={v}");
                }
            }
        }
        out
    }

    /// The positional arguments (bare words), in order.
    pub fn positional(&self) -> impl Iterator<Item = &str> {
        self.args.iter().filter_map(|a| match a {
            Arg::Positional(w) => Some(w.as_str()),
            _ => None,
        })
    }

    /// The value of the first `key=value` argument with this key.
    pub fn named(&self, key: &str) -> Option<&str> {
        self.args.iter().find_map(|a| match a {
            Arg::Named { key: k, value } if k == key => Some(value.as_str()),
            _ => None,
        })
    }
}

impl Script {
    /// Prints the script in the format: headers, a blank line, statements.
    ///
    /// Comments and blank lines of the original are not kept; parsing the
    /// output gives back the same headers and statements (line numbers aside).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let h = &self.headers;
        if let Some(d) = &h.description {
            let _ = writeln!(out, "#! description: {d}");
        }
        if !h.requires.is_empty() {
            let names: Vec<&str> = Capabilities::NAMED
                .iter()
                .filter(|(_, c)| h.requires.contains(*c))
                .map(|(n, _)| *n)
                .collect();
            let _ = writeln!(out, "#! requires: {}", names.join(" "));
        }
        if !h.backends.is_empty() {
            let names: Vec<&str> = h.backends.iter().map(|b| b.name()).collect();
            let _ = writeln!(out, "#! backends: {}", names.join(" "));
        }
        if let Some(seed) = h.seed {
            let _ = writeln!(out, "#! seed: {seed}");
        }
        if !h.devices.is_empty() {
            let _ = writeln!(out, "#! devices: {}", h.devices.join(" "));
        }
        if !h.sim.is_empty() {
            let pairs: Vec<String> = h.sim.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "#! sim: {}", pairs.join(" "));
        }
        if !out.is_empty() {
            out.push('\n');
        }
        for s in &self.statements {
            out.push_str(&s.to_text());
            out.push('\n');
        }
        out
    }

    /// The statement on 1-based line `line`, if any (for a line inside a
    /// `repeat` block, the one of the first iteration).
    pub fn statement_at(&self, line: usize) -> Option<&Statement> {
        self.statements.iter().find(|s| s.line == line)
    }
}
