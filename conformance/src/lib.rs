//! # conformance
//!
//! The verbs conformance suite: the `.verbs` script format, its parser, and
//! one runner generic over [`verbs_api::Verbs`], so that the same scripts
//! run on the simulator in every CI run and on a real NIC where there is one.
//!
//! The format is specified in `docs/script-format.md`. In short:
//!
//! ```text
//! #! requires: rc
//! let d0 = open_device index=0
//! let pd = alloc_pd d0
//! let cq = create_cq d0 cqe=64
//! let a = create_qp pd qp_type=RC send_cq=cq recv_cq=cq
//! modify_qp a qp_state=RTS -> EINVAL
//! ```
//!
//! ## Quick start
//!
//! ```no_run
//! # fn demo<V: verbs_api::Verbs>(backend: &mut V) {
//! let script = conformance::parse("inline.verbs", "let d0 = open_device\n").unwrap();
//! match conformance::run_script(backend, &script) {
//!     conformance::Outcome::Pass => {}
//!     other => panic!("{}", other.report_line(&script.path)),
//! }
//! # }
//! ```
//!
//! The crate sees backends only in its tests: the arms (`tests/scripts.rs`,
//! the `verbsim` command) build a backend per script and hand it to
//! [`run_script`] or [`run_path`].
//!
//! ## Pieces
//!
//! * [`script`]: the syntax tree, printable with [`Script::to_text`].
//! * [`parse()`]: text to [`Script`]; a typo is a [`ParseError`] with its line.
//! * [`runner`]: [`run_script`] → [`Outcome`] (PASS / FAIL with line / SKIP with reason).
//! * [`mask`]: how the fields given become `ibv_modify_qp` and other masks.
//! * [`expect`]: how results are matched against `-> EINVAL` and friends.
//! * [`files`]: running files and directories, [`Summary`].
#![deny(unsafe_code)]

pub mod expect;
pub mod files;
pub mod literal;
pub mod mask;
pub mod model;
mod parse;
pub mod runner;
mod schema;
pub mod script;
pub mod swarm;

pub use files::{collect_scripts, run_file, run_parsed, run_path, Summary};
pub use parse::{parse, ParseError};
pub use runner::{effective_seed, run_script, run_script_with, skip_reason, Outcome, RunOptions};
pub use script::{Arg, Expectation, Headers, Script, Statement};

/// The environment variable that overrides every script's simulator seed
/// (the seed printed by a failing simulated script).
pub const SEED_ENV: &str = "VERBS_SIM_SEED";

/// The seed override from [`SEED_ENV`], if set to a number.
pub fn seed_from_env() -> Option<u64> {
    std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| literal::parse_int(s.trim()))
        .and_then(|v| u64::try_from(v).ok())
}
