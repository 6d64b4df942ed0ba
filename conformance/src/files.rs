//! Running many scripts: collecting `.verbs` files from paths, running each
//! on a fresh backend, and summing up.

use crate::runner::{run_script_with, Outcome, RunOptions};
use crate::script::Script;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use verbs_api::Verbs;

/// The `.verbs` files named by `paths`: files as given, directories searched
/// recursively; in sorted order, without duplicates.
///
/// # Errors
/// A path that does not exist or a directory that cannot be read.
pub fn collect_scripts(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{}: no such file or directory", p.display()),
            ));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "verbs") {
            out.push(p);
        }
    }
    Ok(())
}

/// What a run of many scripts gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Scripts that passed.
    pub passed: usize,
    /// Scripts that failed (including parse errors and panics).
    pub failed: usize,
    /// Scripts that were skipped.
    pub skipped: usize,
    /// Every script with its outcome, in run order.
    pub results: Vec<(String, Outcome)>,
}

impl Summary {
    /// Counts one outcome.
    pub fn add(&mut self, path: String, outcome: Outcome) {
        match outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail { .. } => self.failed += 1,
            Outcome::Skip { .. } => self.skipped += 1,
        }
        self.results.push((path, outcome));
    }

    /// The closing line: `N passed, N failed, N skipped`.
    pub fn closing_line(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// Reads, parses and runs one script file on a backend made by `make`.
///
/// `make` builds a fresh backend for the script (the simulator from its
/// `#! seed:`/`#! devices:`), or returns the outcome to report instead
/// (SKIP when there is no device). A parse error or a panic is a failure.
pub fn run_file<V, F>(path: &Path, make: &mut F, options: &RunOptions) -> Outcome
where
    V: Verbs,
    F: FnMut(&Script) -> Result<V, Outcome>,
{
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            return Outcome::Fail {
                line: 0,
                message: format!("cannot read: {e}"),
            }
        }
    };
    let script = match crate::parse(&shown, &text) {
        Ok(s) => s,
        Err(e) => {
            return Outcome::Fail {
                line: e.line,
                message: format!("parse error: {}", e.message),
            }
        }
    };
    run_parsed(&script, make, options)
}

/// Runs a parsed script on a backend made by `make`, turning a panic into a failure.
pub fn run_parsed<V, F>(script: &Script, make: &mut F, options: &RunOptions) -> Outcome
where
    V: Verbs,
    F: FnMut(&Script) -> Result<V, Outcome>,
{
    let result = catch_unwind(AssertUnwindSafe(|| match make(script) {
        Ok(mut backend) => run_script_with(&mut backend, script, options),
        Err(outcome) => outcome,
    }));
    result.unwrap_or_else(|panic| Outcome::Fail {
        line: 0,
        message: format!(
            "the backend or runner panicked: {}",
            crate::runner::panic_text(&*panic)
        ),
    })
}

/// Runs every script under `paths` (see [`collect_scripts`]) in sorted order,
/// each on a fresh backend from `make`, calling `report` after each.
///
/// # Errors
/// A path that does not exist or cannot be read.
pub fn run_path<V, F>(
    paths: &[PathBuf],
    mut make: F,
    options: &RunOptions,
    mut report: impl FnMut(&str, &Outcome),
) -> std::io::Result<Summary>
where
    V: Verbs,
    F: FnMut(&Script) -> Result<V, Outcome>,
{
    let mut summary = Summary::default();
    for path in collect_scripts(paths)? {
        let outcome = run_file(&path, &mut make, options);
        let shown = path.display().to_string();
        report(&shown, &outcome);
        summary.add(shown, outcome);
    }
    Ok(summary)
}
