//! The script runner: one implementation, generic over `V: Verbs`.
//!
//! [`run_script`] checks the script's `#! backends:` and `#! requires:`
//! against the backend (SKIP, with the reason, when they do not fit), then
//! runs the statements in order. Names bound with `let` hold handles (the
//! backend's associated types), plain values or sets of fields. The first
//! statement whose outcome differs from its expectation ends the run with
//! [`Outcome::Fail`], naming the line, the statement, what was expected and
//! what happened.
//!
//! Waiting is always bounded: a completion, async event or CM event that
//! does not arrive within [`RunOptions::wait_polls`] polls and
//! [`RunOptions::wait_timeout`] fails the statement.
//!
//! Memory: MRs live until the script deregisters them or the backend is
//! dropped, so memory named by a posted work request stays valid until its
//! completion is reaped, which is the contract of the `post_*` verbs. A
//! script that deregisters or rewrites an MR early does so on purpose (the
//! simulator reports it as `ApiMisuse`, `EFAULT`).

mod ext;
mod statements;
pub(crate) mod value;

use crate::expect::check_result;
use crate::literal::{parse_expr, parse_int, split_ref};
use crate::script::{Script, Statement};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;
use value::{compare, field_names, Record, Scalar, Value};
use verbs_api::{BackendKind, Capabilities, Error, Verbs};

/// The result of running one script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every statement behaved as expected.
    Pass,
    /// The statement on `line` did not.
    Fail {
        /// 1-based line of the failing statement (0: before any statement).
        line: usize,
        /// The statement, what was expected and what happened (and, on the
        /// simulator, the seed to replay it).
        message: String,
    },
    /// The script does not apply to this backend.
    Skip {
        /// Why (`requires xrc`, `only for backends: sim`, `no RDMA device: …`).
        reason: String,
    },
}

impl Outcome {
    /// `true` for [`Outcome::Fail`].
    pub fn is_fail(&self) -> bool {
        matches!(self, Self::Fail { .. })
    }

    /// The one-line report `verbsim run` prints for the script at `path`:
    /// `PASS path`, `FAIL path:line: message`, `SKIP path: reason`.
    pub fn report_line(&self, path: &str) -> String {
        match self {
            Self::Pass => format!("PASS {path}"),
            Self::Fail { line, message } => format!("FAIL {path}:{line}: {message}"),
            Self::Skip { reason } => format!("SKIP {path}: {reason}"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pass => f.write_str("PASS"),
            Self::Fail { line, message } => write!(f, "FAIL at line {line}: {message}"),
            Self::Skip { reason } => write!(f, "SKIP: {reason}"),
        }
    }
}

/// How [`run_script_with`] runs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The simulator seed the backend was built with, printed in failures
    /// (`VERBS_SIM_SEED=…`). `None`: the script's `#! seed:` or 0.
    pub seed: Option<u64>,
    /// Most polls while waiting for one completion or event.
    pub wait_polls: u32,
    /// Longest wall-clock wait for one completion or event (hardware).
    pub wait_timeout: Duration,
    /// How long `-> empty` keeps checking on hardware before it believes
    /// the queue is empty (the simulator answers at once).
    pub empty_grace: Duration,
    /// Print each statement to stderr before running it.
    pub verbose: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            seed: None,
            wait_polls: 100_000,
            wait_timeout: Duration::from_secs(5),
            empty_grace: Duration::from_millis(20),
            verbose: false,
        }
    }
}

/// The seed a simulator backend should be built with for `script`:
/// `override_seed` (the `--seed` flag or `VERBS_SIM_SEED`) if given, else
/// the `#! seed:` header, else 0.
pub fn effective_seed(script: &Script, override_seed: Option<u64>) -> u64 {
    override_seed.or(script.headers.seed).unwrap_or(0)
}

/// Why `script` does not run on `backend`, or `None` when it does.
pub fn skip_reason<V: Verbs>(backend: &mut V, script: &Script) -> Option<String> {
    let kind = backend.backend();
    let h = &script.headers;
    if !h.backends.is_empty() && !h.backends.contains(&kind) {
        let names: Vec<&str> = h.backends.iter().map(|b| b.name()).collect();
        return Some(format!(
            "only for backends: {} (this is {})",
            names.join(" "),
            kind.name()
        ));
    }
    let caps = backend.capabilities();
    let missing = h.requires - caps;
    if !missing.is_empty() {
        let names: Vec<&str> = Capabilities::NAMED
            .iter()
            .filter(|(_, c)| missing.contains(*c))
            .map(|(n, _)| *n)
            .collect();
        return Some(format!("requires {}", names.join(" ")));
    }
    None
}

/// Runs `script` on `backend` with the default [`RunOptions`].
pub fn run_script<V: Verbs>(backend: &mut V, script: &Script) -> Outcome {
    run_script_with(backend, script, &RunOptions::default())
}

/// Runs `script` on `backend`: SKIP when the headers exclude the backend,
/// else every statement in order until one fails.
pub fn run_script_with<V: Verbs>(
    backend: &mut V,
    script: &Script,
    options: &RunOptions,
) -> Outcome {
    if let Some(reason) = skip_reason(backend, script) {
        return Outcome::Skip { reason };
    }
    let is_sim = backend.backend() == BackendKind::Sim;
    let seed = effective_seed(script, options.seed);
    let mut runner = Runner {
        v: backend,
        names: BTreeMap::new(),
        options,
    };
    for stmt in &script.statements {
        if options.verbose {
            eprintln!("  {}:{}: {}", script.path, stmt.line, stmt.to_text());
        }
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runner.exec(stmt)))
            .unwrap_or_else(|panic| Err(format!("the backend panicked: {}", panic_text(&*panic))));
        if let Err(why) = step {
            let mut message = format!("{}: {why}", stmt.to_text());
            if is_sim {
                message.push_str(&format!(" (VERBS_SIM_SEED={seed})"));
            }
            return Outcome::Fail {
                line: stmt.line,
                message,
            };
        }
    }
    Outcome::Pass
}

/// The message of a caught panic.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// A statement's failure, in words (the caller adds the statement and line).
pub(crate) type Step<T = ()> = Result<T, String>;

/// The state of one run.
pub(crate) struct Runner<'a, V: Verbs> {
    pub(crate) v: &'a mut V,
    pub(crate) names: BTreeMap<String, Value<V>>,
    pub(crate) options: &'a RunOptions,
}

impl<V: Verbs> Runner<'_, V> {
    /// Checks a verb's result against the statement's expectation; `Some`
    /// with the value when it succeeded as expected, `None` when it failed
    /// as expected.
    pub(crate) fn expect<T>(&self, stmt: &Statement, r: Result<T, Error>) -> Step<Option<T>> {
        match r {
            Ok(t) => check_result(&stmt.expect, Ok(())).map(|_| Some(t)),
            Err(e) => check_result(&stmt.expect, Err(&e)).map(|_| None),
        }
    }

    /// Binds the statement's `let` name, if any.
    pub(crate) fn bind(&mut self, stmt: &Statement, value: Value<V>) {
        if let Some(name) = &stmt.binding {
            self.names.insert(name.clone(), value);
        }
    }

    /// The value a name (or `name.sub` handle path) refers to.
    pub(crate) fn lookup(&mut self, word: &str) -> Step<Value<V>> {
        let (root, path) =
            split_ref(word).ok_or_else(|| format!("expected a name, got `{word}`"))?;
        let value = self.names.get(root).cloned().ok_or_else(|| {
            format!("`{root}` is not bound (its `let` statement failed as expected, or never ran)")
        })?;
        if path.is_empty() {
            return Ok(value);
        }
        match (&value, path) {
            (Value::CmEvent { id, .. }, "id") => Ok(Value::CmId(id.clone())),
            (
                Value::CmEvent {
                    listen_id: Some(id),
                    ..
                },
                "listen_id",
            ) => Ok(Value::CmId(id.clone())),
            (Value::CmId(id), sub) => self.cm_id_path(id.clone(), root, sub, word),
            (Value::CmEvent { id, .. }, p) if p.starts_with("id.") => {
                self.cm_id_path(id.clone(), root, &p["id.".len()..], word)
            }
            (Value::Record(r), p) => {
                r.get(p).cloned().map(Value::Scalar).ok_or_else(|| {
                    format!("`{root}` has no field `{p}` (fields: {})", field_names(r))
                })
            }
            _ => Ok(Value::Scalar(self.field(root, &value, path)?)),
        }
    }

    /// `id.member` or `id.member.field` (e.g. `id.send_cq.cqe`).
    fn cm_id_path(&mut self, id: V::CmId, root: &str, sub: &str, word: &str) -> Step<Value<V>> {
        match sub.split_once('.') {
            Some((member, field)) => {
                let v = self.cm_id_member(id, member, word)?;
                Ok(Value::Scalar(self.field(root, &v, field)?))
            }
            None => self.cm_id_member(id, sub, word),
        }
    }

    fn cm_id_member(&mut self, id: V::CmId, sub: &str, word: &str) -> Step<Value<V>> {
        let info = self
            .v
            .rdma_id_info(&id)
            .map_err(|e| format!("cannot read `{word}`: {e}"))?;
        let missing = || format!("`{word}` is not set (NULL)");
        Ok(match sub {
            "verbs" => Value::Context(info.verbs.ok_or_else(missing)?),
            "pd" => {
                let pd = info.pd.ok_or_else(missing)?;
                let ctx = info.verbs.ok_or_else(missing)?;
                Value::Pd { pd, ctx }
            }
            "qp" => {
                let qp = info.qp.ok_or_else(missing)?;
                let (attr, init) = self
                    .v
                    .query_qp(&qp, verbs_api::QpAttrMask::all_named())
                    .map_err(|e| format!("cannot read `{word}`: {e}"))?;
                let _ = attr;
                Value::Qp(value::QpVal {
                    qp,
                    ctx: info.verbs,
                    qp_type: init.qp_type,
                    dc_type: None,
                    cap: init.cap,
                    port: Some(info.port_num),
                })
            }
            "send_cq" => Value::Cq(info.send_cq.ok_or_else(missing)?),
            "recv_cq" => Value::Cq(info.recv_cq.ok_or_else(missing)?),
            "send_cq_channel" => Value::Channel(info.send_cq_channel.ok_or_else(missing)?),
            "recv_cq_channel" => Value::Channel(info.recv_cq_channel.ok_or_else(missing)?),
            "port_num" => Value::Scalar(Scalar::Int(i128::from(info.port_num))),
            other => {
                return Err(format!(
                    "an rdma_cm id has no member `{other}` (verbs pd qp send_cq recv_cq send_cq_channel recv_cq_channel port_num)"
                ))
            }
        })
    }

    /// A field of a handle binding, read from the backend.
    fn field(&mut self, root: &str, value: &Value<V>, path: &str) -> Step<Scalar> {
        let fail = |e: Error| format!("cannot read `{root}.{path}`: {e}");
        let from = |r: Record| {
            r.get(path).cloned().ok_or_else(|| {
                format!(
                    "`{root}` has no field `{path}` (fields: {})",
                    field_names(&r)
                )
            })
        };
        match value {
            Value::Qp(q) => match path {
                "qp_num" => self
                    .v
                    .qp_num(&q.qp)
                    .map(|n| Scalar::Int(n.into()))
                    .map_err(fail),
                "qp_type" => Ok(value::enum_sym!(verbs_api::QpType, q.qp_type)),
                p if p.starts_with("cap.") => {
                    let mut r = Record::new();
                    value::cap_fields(&mut r, "cap.", &q.cap);
                    from(r)
                }
                _ => {
                    let (attr, init) = self
                        .v
                        .query_qp(&q.qp, verbs_api::QpAttrMask::all_named())
                        .map_err(fail)?;
                    from(value::qp_attr_record(&attr, &init))
                }
            },
            Value::Mr(m) => from(value::mr_record(&self.v.mr_info(m).map_err(fail)?)),
            Value::Cq(c) => {
                let info = self.v.cq_info(c).map_err(fail)?;
                let mut r = Record::new();
                r.insert("cqe".to_owned(), Scalar::Int(info.cqe.into()));
                r.insert("cq_context".to_owned(), Scalar::Int(info.cq_context.into()));
                from(r)
            }
            Value::Srq { srq, attr } => match path {
                "srq_num" => self
                    .v
                    .get_srq_num(srq)
                    .map(|n| Scalar::Int(n.into()))
                    .map_err(fail),
                _ => from(value::srq_attr_record(attr)),
            },
            Value::XrcRcvQp { xrcd, qp_num, .. } => match path {
                "qp_num" => Ok(Scalar::Int((*qp_num).into())),
                _ => {
                    let (attr, init) = self
                        .v
                        .query_xrc_rcv_qp(xrcd, *qp_num, verbs_api::QpAttrMask::all_named())
                        .map_err(fail)?;
                    from(value::qp_attr_record(&attr, &init))
                }
            },
            Value::Mw(m) => {
                let i = self.v.mw_info(m).map_err(fail)?;
                let mut r = Record::new();
                r.insert("rkey".to_owned(), Scalar::Int(i.rkey.into()));
                r.insert(
                    "type".to_owned(),
                    value::enum_sym!(verbs_api::MwType, i.mw_type),
                );
                from(r)
            }
            Value::CmEvent { fields, .. } => from(fields.clone()),
            Value::Record(r) => from(r.clone()),
            other => Err(format!(
                "`{root}` is {} and has no field `{path}`",
                other.kind_name()
            )),
        }
    }

    /// The plain value of an argument or `assert` side: a number, a
    /// reference to a bound value or field, or a bare word.
    pub(crate) fn eval(&mut self, text: &str) -> Step<Scalar> {
        if let Some(v) = parse_int(text) {
            return Ok(Scalar::Int(v));
        }
        if let Some(expr) = parse_expr(text) {
            let bound = expr
                .refs()
                .all(|r| split_ref(r).is_some_and(|(root, _)| self.names.contains_key(root)));
            if bound {
                return expr
                    .eval(|r| match self.eval(r)? {
                        Scalar::Int(v) => Ok(v),
                        Scalar::Sym { raw, .. } => Ok(i128::from(raw)),
                        other => Err(format!("`{r}` in `{text}` is `{other}`, not a number")),
                    })
                    .map(Scalar::Int)
                    .map_err(|e| format!("cannot compute `{text}`: {e}"));
            }
        }
        match split_ref(text) {
            Some((root, _)) if self.names.contains_key(root) => match self.lookup(text)? {
                Value::Scalar(s) => Ok(s),
                other => Err(format!(
                    "`{text}` is {}, not a value (name one of its fields)",
                    other.kind_name()
                )),
            },
            _ => Ok(Scalar::Word(text.to_owned())),
        }
    }

    /// A number: literal, or a bound value/field (enum values give their raw number).
    pub(crate) fn int(&mut self, key: &str, text: &str) -> Step<i128> {
        match self.eval(text)? {
            Scalar::Int(v) => Ok(v),
            Scalar::Sym { raw, .. } => Ok(i128::from(raw)),
            other => Err(format!(
                "expected a number for `{key}`, got `{text}` ({other})"
            )),
        }
    }

    /// A number that must fit in `T`.
    pub(crate) fn num<T: TryFrom<i128>>(&mut self, key: &str, text: &str) -> Step<T> {
        let v = self.int(key, text)?;
        T::try_from(v).map_err(|_| {
            if v < 0 {
                format!("`{key}={text}` is negative ({v}), but `{key}` is unsigned in C")
            } else {
                format!("`{key}={text}` is out of range ({v})")
            }
        })
    }

    /// A number for a field that is a signed `int` in C but a `u32` in the
    /// trait (`ibv_create_cq`'s `cqe` and `comp_vector`): a negative value
    /// is passed as the same 32 bits, as C passes it.
    pub(crate) fn signed_u32_arg(
        &mut self,
        stmt: &Statement,
        key: &str,
        default: u32,
    ) -> Step<u32> {
        let Some(text) = stmt.named(key) else {
            return Ok(default);
        };
        let v = self.int(key, text)?;
        match (u32::try_from(v), i32::try_from(v)) {
            (Ok(u), _) => Ok(u),
            (Err(_), Ok(i)) => Ok(u32::from_ne_bytes(i.to_ne_bytes())),
            _ => Err(format!("`{key}={text}` is out of range ({v})")),
        }
    }

    /// The optional numeric argument `key` of a statement, or `default`.
    pub(crate) fn num_arg<T: TryFrom<i128>>(
        &mut self,
        stmt: &Statement,
        key: &str,
        default: T,
    ) -> Step<T> {
        match stmt.named(key) {
            Some(text) => self.num(key, text),
            None => Ok(default),
        }
    }

    /// An enum value by C name (or its raw number, or a bound value of that type).
    pub(crate) fn sym<T>(
        &mut self,
        key: &str,
        text: &str,
        from_name: fn(&str) -> Option<T>,
        from_raw: fn(u32) -> T,
    ) -> Step<T> {
        if let Some(v) = from_name(text) {
            return Ok(v);
        }
        let raw = self.int(key, text)?;
        u32::try_from(raw)
            .map(from_raw)
            .map_err(|_| format!("`{key}={text}` is out of range"))
    }

    /// A flag set by names joined by `|` (or a number, or a bound value).
    pub(crate) fn flags<T>(
        &mut self,
        key: &str,
        text: &str,
        from_names: fn(&str) -> Option<T>,
    ) -> Step<T> {
        if let Some(v) = from_names(text) {
            return Ok(v);
        }
        let raw = self.int(key, text)?;
        from_names(&raw.to_string())
            .ok_or_else(|| format!("`{key}={text}` is not a valid flag set"))
    }

    /// Checks `LEFT OP RIGHT`.
    pub(crate) fn assert(&mut self, stmt: &Statement) -> Step {
        let words: Vec<&str> = stmt.positional().collect();
        let [l, op, r] = words[..] else {
            return Err("expected `assert LEFT OP RIGHT`".to_owned());
        };
        let left = self.eval(l)?;
        let right = self.eval(r)?;
        if compare(&left, op, &right)? {
            Ok(())
        } else {
            Err(format!(
                "assertion failed: {l} is {left}, expected {op} {right}"
            ))
        }
    }

    /// `true` when `text` is a list of alternatives `A|B` for `got`: any
    /// value but a flag set (where `A|B` is the set of both).
    fn either_or(got: &Scalar, text: &str) -> bool {
        text.contains('|') && !matches!(got, Scalar::Sym { parse, .. } if parse(text).is_some())
    }

    /// Whether an actual field value matches the expected text (either
    /// alternative of `A|B`, see [`Self::either_or`]).
    fn field_matches(&mut self, got: &Scalar, text: &str) -> Step<bool> {
        if Self::either_or(got, text) {
            for alt in text.split('|') {
                if compare(got, "==", &self.eval(alt)?)? {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        compare(got, "==", &self.eval(text)?)
    }

    /// Checks expected `key=value` fields against a record of actual ones.
    pub(crate) fn check_fields(
        &mut self,
        what: &str,
        actual: &Record,
        expected: &[(String, String)],
    ) -> Step {
        let mut wrong = Vec::new();
        for (key, text) in expected {
            let Some(got) = actual.get(key) else {
                return Err(format!("{what} has no field `{key}`"));
            };
            if key == "private_data" {
                // The transport reports its whole private-data area, zero
                // padded past what the peer sent (rdma_reject(3): "may be
                // larger than that requested"): HEX must be a prefix and the
                // rest zero.
                let want = text.trim_start_matches("0x").to_ascii_lowercase();
                let have = got.to_string().to_ascii_lowercase();
                let ok = have
                    .strip_prefix(want.as_str())
                    .is_some_and(|rest| rest.bytes().all(|b| b == b'0'));
                if !ok {
                    wrong.push(format!("{key}={got} (expected {text}, then zero bytes)"));
                }
                continue;
            }
            if !self.field_matches(got, text)? {
                let expected = if Self::either_or(got, text) {
                    format!("one of {}", text.replace('|', " "))
                } else {
                    text.clone()
                };
                wrong.push(format!("{key}={got} (expected {expected})"));
            }
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("{what} does not match: {}", wrong.join(", ")))
        }
    }
}
